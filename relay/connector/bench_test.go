package connector_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/gateway"
)

// discardLog is an audit.Log that keeps nothing, to separate the relay
// path's cost from the audit chain's.
type discardLog struct{}

func (discardLog) Append(context.Context, audit.Entry) (audit.Record, error) {
	return audit.Record{}, nil
}

// benchEnv is newEnv for benchmarks.
func benchEnv(b *testing.B, log audit.Log) *env {
	e := newEnv(b, func(c *connector.Config) {
		if log != nil {
			c.Audit = log
		}
		c.PingInterval = -1
	})
	return e
}

// eventCount counts inbound events, signalling each.
type eventCount struct {
	n       atomic.Int64
	changed chan struct{}
}

// counting connects an adapter that counts inbound events.
func counting(b *testing.B, e *env, platform, bot string) (*gateway.Adapter, *eventCount) {
	n := &eventCount{changed: make(chan struct{}, 1)}
	a, err := gateway.New(gateway.Config{URL: e.srv.URL, GatewayID: "gw-a", Secret: secretA, Platform: platform, BotID: bot,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(context.Context, gateway.Inbound) error {
			n.n.Add(1)
			select {
			case n.changed <- struct{}{}:
			default:
			}
			return nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Connect(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	return a, n
}

// waitCount returns once n has counted want events.
func waitCount(b *testing.B, n *eventCount, want int64) {
	timeout := time.After(60 * time.Second)
	for n.n.Load() < want {
		select {
		case <-n.changed:
		case <-timeout:
			b.Fatalf("received %d of %d events", n.n.Load(), want)
		}
	}
}

// BenchmarkInboundEvents measures inbound events per second to a gateway
// adapter over loopback. "deliver" starts at the connector's pipeline
// (dedupe, chat binding, routing, audit, frame, socket, adapter); "webhook"
// adds the Telegram webhook's HTTP request (secret check, parse,
// normalize). Each runs with the in-memory audit chain and with a discarding
// log, to show what the audit record costs.
func BenchmarkInboundEvents(b *testing.B) {
	for _, logName := range []string{"audit=memory", "audit=discard"} {
		var log audit.Log
		if logName == "audit=discard" {
			log = discardLog{}
		}
		b.Run("deliver/"+logName, func(b *testing.B) {
			e := benchEnv(b, log)
			_, n := counting(b, e, "telegram", telegramBot)
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					ev := relay.MessageEvent{Text: "hello", MessageType: relay.MessageText, MessageID: fmt.Sprint(i),
						Source: relay.SessionSource{Platform: "telegram", ChatID: forumChat, ChatType: "forum", ThreadID: fmt.Sprint(i % 100), UserID: "9"}}
					if _, err := e.conn.Deliver(context.Background(), connector.Inbound{Tenant: slot1, Bot: telegramBot, Event: ev, DedupeID: ev.MessageID}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			waitCount(b, n, int64(b.N))
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
		b.Run("webhook/"+logName, func(b *testing.B) {
			e := benchEnv(b, log)
			_, n := counting(b, e, "telegram", telegramBot)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/telegram/"+telegramBot,
						strings.NewReader(forumUpdate(int(i), int(i), int(i%100)+2, "hello")))
					req.Header.Set("X-Telegram-Bot-Api-Secret-Token", tgSecret)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			waitCount(b, n, int64(b.N))
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkIdleSessions measures the connector-side memory of 10,000 idle
// sessions of one connected gateway: each made by a Discord interaction, so
// it holds a routing entry (owner connection), a vault capability, a dedupe
// key and a chat binding (in the in-memory store). It reports bytes per
// session and MB for 10,000.
func BenchmarkIdleSessions(b *testing.B) {
	const sessions = 10000
	for range b.N {
		b.StopTimer()
		e := benchEnv(b, discardLog{})
		_, n := counting(b, e, "discord", discordApp)
		before := heapInUse()
		b.StartTimer()
		for i := range sessions {
			ev := relay.MessageEvent{Text: "hi", MessageType: relay.MessageCommand, MessageID: fmt.Sprint(1300000000000000000 + i),
				Source: relay.SessionSource{Platform: "discord", ChatID: fmt.Sprint(400000000000000000 + i), ChatType: "group",
					UserID: "555", UserName: "al", GuildID: "111"}}
			_, err := e.conn.Deliver(context.Background(), connector.Inbound{Tenant: slot1, Bot: discordApp, Event: ev, DedupeID: ev.MessageID,
				Capability: &relay.Capability{Kind: relay.KindDiscordInteractionToken, Bot: discordApp,
					Secret: strings.Repeat("t", 180), ExpiresAt: time.Now().Add(15 * time.Minute)}})
			if err != nil {
				b.Fatal(err)
			}
		}
		waitCount(b, n, sessions)
		b.StopTimer()
		after := heapInUse()
		per := float64(after-before) / sessions
		b.ReportMetric(per, "bytes/session")
		b.ReportMetric(per*sessions/1e6, "MB/10k-sessions")
		_ = e.conn.Close()
	}
}

// BenchmarkIdleConnections measures the memory of idle gateway connections,
// both ends in this process (the connector's socket and the adapter's), for
// 1,000 connections (10,000 would need 20,000 descriptors, this machine's
// limit). It reports bytes per connection.
func BenchmarkIdleConnections(b *testing.B) {
	const conns = 1000
	for range b.N {
		b.StopTimer()
		e := benchEnv(b, discardLog{})
		before := heapInUse()
		b.StartTimer()
		var adapters []*gateway.Adapter
		for range conns {
			a, err := gateway.New(gateway.Config{URL: e.srv.URL, GatewayID: "gw-a", Secret: secretA, Platform: "discord", BotID: discordApp,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Connect(b.Context()); err != nil {
				b.Fatal(err)
			}
			adapters = append(adapters, a)
		}
		b.StopTimer()
		after := heapInUse()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(after-before)/conns, "heap-bytes/conn")
		b.ReportMetric(float64(runtime.NumGoroutine())/conns, "goroutines/conn")
		b.ReportMetric(float64(ms.StackInuse)/conns, "stack-bytes/conn")
		for _, a := range adapters {
			_ = a.Close()
		}
		_ = e.conn.Close()
	}
}
