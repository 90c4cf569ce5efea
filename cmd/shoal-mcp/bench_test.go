package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// p50 is the median of ds.
func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rawTimed sends one request over the peer's transport and times the
// round trip.
func rawTimed(b *testing.B, p *mcpPeer, id int, method string, params any) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	start := time.Now()
	resp, err := p.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(fmt.Sprintf("b-%d", id)), Method: method, Params: params})
	d := time.Since(start)
	if err != nil || resp.Error != nil {
		b.Fatalf("%s: %v %+v", method, err, resp)
	}
	return d
}

// asInProduction makes the facades a benchmark starts skip the output
// schema check that TestMain turns on for tests; it returns no extra
// flags.
func asInProduction(b *testing.B) []string {
	b.Helper()
	old := os.Getenv(checkOutputEnv)
	os.Unsetenv(checkOutputEnv)
	b.Cleanup(func() { os.Setenv(checkOutputEnv, old) })
	return nil
}

// BenchmarkFacade measures the facade over stdio against the cheapest MCP
// round trip (ping) in the same run.
func BenchmarkFacade(b *testing.B) {
	sd := newStateDir(b)
	p := startStdio(b, sd, "agent:bench", asInProduction(b)...)
	m, _ := p.callOK("shoal_exec", map[string]any{"source": `printf '{"rows":[{"name":"a","n":1},{"name":"b","n":2}]}' | from json`})
	readURI := m["uri"].(string) + "?path=.rows[1].name"

	b.Run("read-vs-ping", func(b *testing.B) {
		var pings, reads []time.Duration
		for i := 0; b.Loop(); i++ {
			pings = append(pings, rawTimed(b, p, 2*i, "ping", map[string]any{}))
			reads = append(reads, rawTimed(b, p, 2*i+1, "resources/read", map[string]any{"uri": readURI}))
		}
		pp, rp := p50(pings), p50(reads)
		b.ReportMetric(ms(pp), "ping-p50-ms")
		b.ReportMetric(ms(rp), "read-p50-ms")
		b.ReportMetric(float64(rp)/float64(pp), "read/ping")
	})

	b.Run("exec-echo", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			res := p.call("shoal_exec", map[string]any{"source": "echo hi"})
			ds = append(ds, time.Since(start))
			if res.IsError {
				b.Fatal(resultText(res))
			}
		}
		b.ReportMetric(ms(p50(ds)), "p50-ms")
	})

	b.Run("publish-to-notification", func(b *testing.B) {
		const uri = "shoal://events/user.bench"
		if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
			b.Fatal(rerr.Message)
		}
		pub := sd.dial(b, "human:bench", nil)
		ctx := context.Background()
		var ds []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			ev, err := pub.Publish(ctx, "user.bench", map[string]any{"i": i})
			if err != nil {
				b.Fatal(err)
			}
			for {
				up := p.nextUpdate(uri)
				if up.Seq == ev.Seq {
					break
				}
			}
			ds = append(ds, time.Since(start))
		}
		b.ReportMetric(ms(p50(ds)), "p50-ms")
	})
}
