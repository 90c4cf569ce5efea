package cluster_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

// BenchmarkNotify measures publish → notification: a client of kernel A
// publishes and waits until a subscriber gets the event. "local" is a
// local channel with the subscriber on A; "cluster" a shared channel with
// the subscriber on kernel B (through the NATS server). Compare the two
// ns/op (same run).
func BenchmarkNotify(b *testing.B) {
	n := startNATS(b)
	got := make(chan client.Event, 1)
	onEvent := func(e client.Event) {
		select {
		case got <- e:
		default:
		}
	}
	a := startMember(b, "a", n.url(), sharedConfig, client.Options{})
	bm := startMember(b, "b", n.url(), sharedConfig, client.Options{OnEvent: onEvent})
	aSub := testkernel.Attach(b, a.dir, client.Options{Principal: "agent:sub", OnEvent: onEvent})
	x := context.Background()
	payload := json.RawMessage(`{"n":1}`)
	run := func(b *testing.B, channel string, sub *client.Client) {
		if _, err := sub.Subscribe(x, channel); err != nil {
			b.Fatal(err)
		}
		// One publish first, so the channel is followed everywhere.
		if _, err := a.c.Publish(x, channel, payload); err != nil {
			b.Fatal(err)
		}
		<-got
		b.ResetTimer()
		for b.Loop() {
			if _, err := a.c.Publish(x, channel, payload); err != nil {
				b.Fatal(err)
			}
			<-got
		}
	}
	b.Run("local", func(b *testing.B) { run(b, "user.bench.local", aSub) })
	b.Run("cluster", func(b *testing.B) { run(b, "user.ci.bench", bm.c) })
}

// BenchmarkPublish measures one client's publish rate (each publish
// waits for its answer): a local channel vs a shared one, whose answer
// waits for the stream's ack and the local delivery.
func BenchmarkPublish(b *testing.B) {
	n := startNATS(b)
	a := startMember(b, "a", n.url(), sharedConfig, client.Options{})
	x := context.Background()
	payload := json.RawMessage(`{"n":1}`)
	for _, ch := range []struct{ name, channel string }{{"local", "user.bench.local"}, {"cluster", "user.ci.rate"}} {
		b.Run(ch.name, func(b *testing.B) {
			if _, err := a.c.Publish(x, ch.channel, payload); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := a.c.Publish(x, ch.channel, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
