package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

// BenchmarkFacadeExec measures what the facade itself adds to shoal_exec:
// the facade's handling of a tools/call, in process (no stdio), against
// the same execution through the client SDK, interleaved in one run.
func BenchmarkFacadeExec(b *testing.B) {
	dir := testkernel.ShortDir(b)
	testkernel.Start(b, kernel.Options{StateDir: dir})
	direct := testkernel.Attach(b, dir, client.Options{Principal: "agent:direct", Session: "direct"})
	asInProduction(b)
	f := newFacade(func(ctx context.Context, onEvent func(client.Event)) (*client.Client, error) {
		return client.Dial(ctx, client.Options{StateDir: dir, Principal: "agent:facade", Session: "facade", OnEvent: onEvent})
	}, slog.New(slog.DiscardHandler))
	defer f.Close()
	s := f.newSession()
	ctx := context.Background()
	f.handle(ctx, s, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`))
	f.handle(ctx, s, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shoal_exec","arguments":{"source":"echo hi"}}}`)
	var facade, sdk []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if resp := f.handle(ctx, s, call); len(resp) == 0 {
			b.Fatal("no response")
		}
		facade = append(facade, time.Since(t0))
		t0 = time.Now()
		if _, err := direct.Exec(ctx, "echo hi", client.ExecOptions{TimeoutMS: 30000}); err != nil {
			b.Fatal(err)
		}
		sdk = append(sdk, time.Since(t0))
	}
	fp, sp := p50(facade), p50(sdk)
	b.ReportMetric(float64(fp.Microseconds()), "facade-p50-µs")
	b.ReportMetric(float64(sp.Microseconds()), "sdk-p50-µs")
	b.ReportMetric(float64((fp - sp).Microseconds()), "added-µs")
}
