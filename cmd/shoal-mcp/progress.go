package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/shoal-sh/shoal/core/wire"
)

// progressEvery is the least time between two notifications/progress of
// one call.
const progressEvery = 500 * time.Millisecond

// progressKeyFor is a fresh key naming one execution for exec.progress.
func progressKeyFor() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// reportProgress sends notifications/progress for a call that carried a
// progressToken, every progressEvery while its execution runs: elapsed
// seconds as the progress, and a message with the bytes and lines so far
// and the last line. The returned func stops it.
func (f *Facade) reportProgress(ctx context.Context, token mcp.ProgressToken, key string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		last := -1.0
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var pr wire.Progress
			if err := f.link.call(ctx, "exec.progress", map[string]string{"key": key}, &pr); err != nil || !pr.Running {
				continue
			}
			progress := float64(pr.ElapsedMS) / 1000
			if progress <= last {
				continue // progress must grow
			}
			last = progress
			_ = f.mcp.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
				"progressToken": token,
				"progress":      progress,
				"message":       progressMessage(pr),
			})
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// progressMessage says how far a run has got, in one bounded line.
func progressMessage(pr wire.Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "running %.1fs; stdout %s, %d lines", float64(pr.ElapsedMS)/1000, byteSize(pr.StdoutBytes), pr.StdoutLines)
	if pr.StderrBytes > 0 {
		fmt.Fprintf(&b, "; stderr %s, %d lines", byteSize(pr.StderrBytes), pr.StderrLines)
	}
	if pr.LastLine != "" {
		fmt.Fprintf(&b, "; last: %s", pr.LastLine)
	}
	return b.String()
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
