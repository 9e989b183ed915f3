package connector

import (
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
)

// chatSessions remembers, per chat, the session key of the last inbound
// message this process delivered or buffered, so an outbound action that
// names only its chat (send, edit, typing, ...: the gateway's wire form
// carries no session key) is filed under that conversation. It is bounded:
// past maxChatSessions chats it forgets everything and starts again (the
// worst case is an outbound record without a conversation).
type chatSessions struct {
	mu sync.Mutex
	m  map[chatRef]string
}

type chatRef struct {
	tenant              contract.TenantSlot
	platform, bot, chat string
}

const maxChatSessions = 100_000

func (s *chatSessions) remember(tenant contract.TenantSlot, platform, bot, chat, key string) {
	if key == "" || chat == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxChatSessions {
		s.m = make(map[chatRef]string)
	}
	s.m[chatRef{tenant, platform, bot, chat}] = key
}

func (s *chatSessions) lookup(tenant contract.TenantSlot, platform, bot, chat string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[chatRef{tenant, platform, bot, chat}]
}
