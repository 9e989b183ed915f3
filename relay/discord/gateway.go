package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Session is one bot's Gateway (WebSocket) connection for messages, hand
// written on coder/websocket (docs/relay-platforms.md says why): it
// identifies with MessageIntents, keeps the heartbeat (a missed ack
// reconnects), resumes after a disconnect with the last sequence number,
// identifies again after an invalid session, and hands every MESSAGE_CREATE
// and every MESSAGE_UPDATE that is an edit (Edit set) to OnMessage.
type Session struct {
	// API answers GET /gateway/bot when GatewayURL is empty.
	API *Client
	// Token is the bot token sent in identify and resume.
	Token string
	// GatewayURL, when set, is dialled instead of asking GET /gateway/bot.
	GatewayURL string
	// Intents defaults to MessageIntents.
	Intents int
	// OnMessage receives each MESSAGE_CREATE and edit, with the bot's own user id
	// (from READY). It runs on the read loop: keep it short.
	OnMessage func(ctx context.Context, m MessageCreate, botUserID string)
	// ReconnectDelay is the first wait before a reconnect (doubling to
	// 60 s while attempts fail); default 1 s.
	ReconnectDelay time.Duration
	Logger         *slog.Logger

	// jitter is the fraction of the interval before the first heartbeat
	// (rand.Float64 when nil; tests pin it).
	jitter func() float64

	mu        sync.Mutex
	sessionID string
	resumeURL string
	seq       int64
	botUserID string
	gateway   string
}

// helloTimeout bounds the wait for the Gateway's hello.
const helloTimeout = 30 * time.Second

// errFatal marks a close code after which reconnecting cannot help (bad
// token, disallowed or invalid intents).
type errFatal struct{ code websocket.StatusCode }

func (e errFatal) Error() string {
	return fmt.Sprintf("discord: gateway closed with %d; not reconnecting", int(e.code))
}

// fatalCloses are Discord's close codes that forbid reconnecting.
var fatalCloses = map[websocket.StatusCode]bool{4004: true, 4010: true, 4011: true, 4012: true, 4013: true, 4014: true}

// staleCloses end the session: reconnect with a fresh identify.
var staleCloses = map[websocket.StatusCode]bool{4007: true, 4009: true}

// State returns the session id and last sequence number (for tests and
// logs).
func (s *Session) State() (sessionID string, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID, s.seq
}

// Run connects and reconnects until ctx ends (then it returns nil) or the
// Gateway closes with a code that forbids reconnecting.
func (s *Session) Run(ctx context.Context) error {
	log := s.logger()
	delay := s.ReconnectDelay
	if delay <= 0 {
		delay = time.Second
	}
	wait := delay
	for ctx.Err() == nil {
		ready, err := s.connect(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fatal errFatal
		if errors.As(err, &fatal) {
			return err
		}
		if ready {
			wait = delay
		}
		log.Info("discord: gateway disconnected; reconnecting", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if !ready {
			wait = min(wait*2, time.Minute)
		}
	}
	return nil
}

// dialURL is where to connect: the resume URL while a session can be
// resumed, else the Gateway URL.
func (s *Session) dialURL(ctx context.Context) (string, bool, error) {
	s.mu.Lock()
	resume := s.sessionID != ""
	u := s.resumeURL
	if !resume || u == "" {
		u = s.gateway
	}
	s.mu.Unlock()
	if u == "" {
		u = s.GatewayURL
	}
	if u == "" {
		if s.API == nil {
			return "", false, errors.New("discord: gateway: no gateway_url and no API client")
		}
		g, err := s.API.GatewayBot(ctx)
		if err != nil {
			return "", false, err
		}
		s.mu.Lock()
		s.gateway = g
		s.mu.Unlock()
		u = g
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", false, fmt.Errorf("discord: gateway url %q: %w", u, err)
	}
	q := pu.Query()
	q.Set("v", "10")
	q.Set("encoding", "json")
	pu.RawQuery = q.Encode()
	return pu.String(), resume, nil
}

// connect runs one connection to its end. ready reports whether it got as
// far as READY or RESUMED.
func (s *Session) connect(ctx context.Context) (ready bool, err error) {
	u, resume, err := s.dialURL(ctx)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return false, fmt.Errorf("discord: gateway dial: %w", err)
	}
	ws.SetReadLimit(MaxPayloadBytes)
	defer ws.CloseNow()

	helloCtx, helloDone := context.WithTimeout(ctx, helloTimeout)
	hello, err := s.read(helloCtx, ws)
	helloDone()
	if err != nil {
		return false, err
	}
	if hello.Op != OpHello {
		return false, fmt.Errorf("discord: gateway: first payload is op %d, not hello", hello.Op)
	}
	var h struct {
		HeartbeatInterval int64 `json:"heartbeat_interval"`
	}
	if err := json.Unmarshal(hello.D, &h); err != nil || h.HeartbeatInterval <= 0 {
		return false, fmt.Errorf("discord: gateway: hello without a heartbeat_interval")
	}
	if resume {
		s.mu.Lock()
		d := map[string]any{"token": s.Token, "session_id": s.sessionID, "seq": s.seq}
		s.mu.Unlock()
		err = s.send(ctx, ws, OpResume, d)
	} else {
		err = s.identify(ctx, ws)
	}
	if err != nil {
		return false, err
	}

	acked := make(chan struct{}, 1)
	beatNow := make(chan struct{}, 1)
	hbErr := make(chan error, 1)
	go func() {
		hbErr <- s.heartbeat(ctx, ws, time.Duration(h.HeartbeatInterval)*time.Millisecond, acked, beatNow)
		cancel()
	}()

	for {
		p, err := s.read(ctx, ws)
		if err != nil {
			select {
			case e := <-hbErr:
				if e != nil {
					return ready, e
				}
			default:
			}
			return ready, err
		}
		switch p.Op {
		case OpDispatch:
			got, err := s.dispatch(ctx, p)
			if err != nil {
				return ready, err
			}
			ready = ready || got
		case OpHeartbeat:
			select {
			case beatNow <- struct{}{}:
			default:
			}
		case OpHeartbeatAck:
			select {
			case acked <- struct{}{}:
			default:
			}
		case OpReconnect:
			ws.CloseNow() // not a 1000 close: the session stays resumable
			return ready, errors.New("discord: gateway asked for a reconnect")
		case OpInvalidSession:
			var resumable bool
			_ = json.Unmarshal(p.D, &resumable)
			if !resumable {
				s.forget()
			}
			ws.CloseNow()
			return ready, fmt.Errorf("discord: gateway: invalid session (resumable %v)", resumable)
		}
	}
}

// dispatch handles an op 0 payload: it keeps its sequence number, takes
// the session from READY, and hands a message (or an edit) to OnMessage.
// ready says the payload was READY or RESUMED.
func (s *Session) dispatch(ctx context.Context, p Payload) (ready bool, err error) {
	if p.S != nil {
		s.mu.Lock()
		s.seq = *p.S
		s.mu.Unlock()
	}
	switch p.T {
	case "READY":
		var r struct {
			SessionID        string `json:"session_id"`
			ResumeGatewayURL string `json:"resume_gateway_url"`
			User             User   `json:"user"`
		}
		if err := json.Unmarshal(p.D, &r); err != nil || r.SessionID == "" {
			return false, fmt.Errorf("discord: gateway: READY without a session_id")
		}
		s.mu.Lock()
		s.sessionID, s.resumeURL, s.botUserID = r.SessionID, r.ResumeGatewayURL, r.User.ID
		s.mu.Unlock()
		return true, nil
	case "RESUMED":
		return true, nil
	case "MESSAGE_CREATE", "MESSAGE_UPDATE":
		m, err := ParseMessageCreate(p.D)
		if p.T == "MESSAGE_UPDATE" {
			// Discord also sends MESSAGE_UPDATE, partial, when it
			// resolves a link's embed: only an edit (with its
			// edited_timestamp) is a message.
			if err != nil || m.EditedTimestamp == "" {
				return false, nil
			}
			m.Edit = true
		}
		if err != nil {
			s.logger().Warn("discord: gateway: bad MESSAGE_CREATE", "err", err)
			return false, nil
		}
		if s.OnMessage != nil {
			s.mu.Lock()
			bot := s.botUserID
			s.mu.Unlock()
			s.OnMessage(ctx, m, bot)
		}
	}
	return false, nil
}

// heartbeat sends op 1 every interval (the first after a random fraction
// of it, as Discord asks) and when the Gateway requests one; a beat whose
// predecessor was never acknowledged ends the connection instead (a zombie
// connection: reconnect and resume).
func (s *Session) heartbeat(ctx context.Context, ws *websocket.Conn, interval time.Duration, acked, beatNow <-chan struct{}) error {
	jitter := s.jitter
	if jitter == nil {
		jitter = rand.Float64
	}
	t := time.NewTimer(time.Duration(jitter() * float64(interval)))
	defer t.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-acked:
			pending = false
			continue
		case <-beatNow:
		case <-t.C:
			if pending {
				ws.CloseNow() // a zombie connection: no close handshake to wait for
				return errors.New("discord: gateway: heartbeat not acknowledged")
			}
			t.Reset(interval)
		}
		s.mu.Lock()
		var seq any
		if s.seq > 0 {
			seq = s.seq
		}
		s.mu.Unlock()
		if err := s.send(ctx, ws, OpHeartbeat, seq); err != nil {
			return err
		}
		pending = true
	}
}

func (s *Session) identify(ctx context.Context, ws *websocket.Conn) error {
	intents := s.Intents
	if intents == 0 {
		intents = MessageIntents
	}
	return s.send(ctx, ws, OpIdentify, map[string]any{
		"token":      s.Token,
		"intents":    intents,
		"properties": map[string]string{"os": "linux", "browser": "caduceus", "device": "caduceus"},
	})
}

// forget drops the session so that the next connection identifies.
func (s *Session) forget() {
	s.mu.Lock()
	s.sessionID, s.resumeURL, s.seq = "", "", 0
	s.mu.Unlock()
}

func (s *Session) send(ctx context.Context, ws *websocket.Conn, op int, d any) error {
	b, err := json.Marshal(map[string]any{"op": op, "d": d})
	if err != nil {
		return err
	}
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("discord: gateway write: %w", err)
	}
	return nil
}

// read returns the next payload; a close frame becomes errFatal for the
// codes that forbid reconnecting and forgets the session for the stale ones.
func (s *Session) read(ctx context.Context, ws *websocket.Conn) (Payload, error) {
	_, b, err := ws.Read(ctx)
	if err != nil {
		code := websocket.CloseStatus(err)
		if fatalCloses[code] {
			return Payload{}, errFatal{code}
		}
		if staleCloses[code] {
			s.forget()
		}
		return Payload{}, fmt.Errorf("discord: gateway read: %w", err)
	}
	p, err := ParsePayload(b)
	if err != nil {
		return Payload{}, err
	}
	return p, nil
}

func (s *Session) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
