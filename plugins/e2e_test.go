package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/boot"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/plugins"
	"github.com/shoal-sh/shoal/sdk/client"
)

// kernelWithKV starts a full kernel (built-in families and the kv plugin)
// and attaches a client.
func kernelWithKV(tb testing.TB) *client.Client {
	tb.Helper()
	k := testkernel.Start(tb, kernel.Options{PluginDirs: []string{plugins.KVFolder(tb)}})
	return testkernel.Attach(tb, k.StateDir(), client.Options{Principal: "agent:plug"})
}

// TestPluginThroughKernel: a plugin family is listed, templated and read
// through the same socket, router and rendering as the built-ins.
func TestPluginThroughKernel(t *testing.T) {
	c := kernelWithKV(t)
	ctx := context.Background()
	got, err := c.Read(ctx, "shoal://kv/fleet?path=[1].name")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.StructuredContent) == 0 || got.Contents[0].MimeType != "application/json" {
		t.Fatalf("read: %+v", got)
	}
	if _, err := c.Read(ctx, "shoal://kv/fleet?path=[0].nope"); client.Code(err) != -32005 {
		t.Errorf("bad path on a plugin value: %v", err)
	}
	var list struct {
		Resources []struct{ URI string } `json:"resources"`
	}
	if err := c.Call(ctx, "resources.list", nil, &list); err != nil {
		t.Fatal(err)
	}
	if n := len(list.Resources); n < 7 || list.Resources[5].URI != "shoal://pty" {
		t.Fatalf("built-in roots must stay first: %+v", list.Resources)
	}
	foundKV := false
	for _, r := range list.Resources[6:] {
		foundKV = foundKV || r.URI == "shoal://kv"
	}
	if !foundKV {
		t.Errorf("plugin root missing: %+v", list.Resources)
	}
}

// TestKernelPluginFailsLate: a plugin whose module fails in the
// background does not stop the kernel; its reads answer PLUGIN_ERROR with
// the reason, plugin.list shows it failed, and resources.list still
// serves everything else, with a warning.
func TestKernelPluginFailsLate(t *testing.T) {
	k := testkernel.Start(t, kernel.Options{PluginDirs: []string{plugins.KVFolder(t), plugins.BadDescribeFolder(t)}})
	c := testkernel.Attach(t, k.StateDir(), client.Options{Principal: "agent:plug"})
	ctx := context.Background()
	_, err := c.Read(ctx, "shoal://raw/x")
	if client.Code(err) != -32030 || !strings.Contains(err.Error(), "failed to load") || !strings.Contains(err.Error(), "shoal_describe") {
		t.Fatalf("read of a plugin that failed to load: %v", err)
	}
	if _, err := c.Read(ctx, "shoal://kv/answer"); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Plugins []plugins.PluginStatus `json:"plugins"`
	}
	if err := c.Call(ctx, "plugin.list", nil, &list); err != nil {
		t.Fatal(err)
	}
	health := map[string]string{}
	for _, p := range list.Plugins {
		health[p.Name] = p.Health
		if p.Name == "raw" && !strings.Contains(p.Error, "shoal_describe") {
			t.Errorf("raw status: %+v", p)
		}
	}
	if health["kv"] != plugins.HealthOK || health["raw"] != plugins.HealthFailed {
		t.Errorf("plugin.list health %v", health)
	}
	var res struct {
		Resources []struct{ URI string } `json:"resources"`
		Warnings  []string               `json:"warnings"`
	}
	if err := c.Call(ctx, "resources.list", nil, &res); err != nil {
		t.Fatal(err)
	}
	foundKV := false
	for _, r := range res.Resources {
		foundKV = foundKV || r.URI == "shoal://kv"
	}
	if !foundKV || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "plugin raw: failed to load") {
		t.Errorf("resources.list: %+v", res)
	}
}

// TestBindingOutsideDeclaredChannels: config.toml binding a validator to a
// channel its manifest does not declare stops the kernel at start with
// both names, instead of failing every publish later.
func TestBindingOutsideDeclaredChannels(t *testing.T) {
	dir := testkernel.ShortDir(t)
	cfg := "[[events.channel]]\nname = \"user.deploy.v1\"\nvalidator = \"buildcheck\"\n"
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := boot.NewKernel(kernel.Options{StateDir: dir, PluginDirs: []string{plugins.BuildcheckFolder(t)}})
	if err == nil {
		k.Stop()
		t.Fatal("the kernel started with a validator bound to a channel it does not declare")
	}
	for _, want := range []string{"user.deploy.v1", "buildcheck", "declares channels user.build.v1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func p50(lat []time.Duration) time.Duration {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2]
}

// BenchmarkReadOverSocket compares what a client waits for: a warm read of
// a small value from the kv plugin and of the same value from the
// built-in transcript (shoal://out/N), over the kernel socket, alternated
// in one run.
func BenchmarkReadOverSocket(b *testing.B) {
	c := kernelWithKV(b)
	ctx := context.Background()
	r, err := c.Exec(ctx, `jq -n '42'`, client.ExecOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, target := range []string{"shoal://kv/answer", r.URI} {
		if _, err := c.Read(ctx, target); err != nil {
			b.Fatal(err)
		}
	}
	plugin := make([]time.Duration, 0, b.N)
	builtin := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Read(ctx, "shoal://kv/answer"); err != nil {
			b.Fatal(err)
		}
		plugin = append(plugin, time.Since(t0))
		t0 = time.Now()
		if _, err := c.Read(ctx, r.URI); err != nil {
			b.Fatal(err)
		}
		builtin = append(builtin, time.Since(t0))
	}
	p, bi := p50(plugin), p50(builtin)
	b.ReportMetric(float64(p.Microseconds()), "plugin-p50-µs")
	b.ReportMetric(float64(bi.Microseconds()), "builtin-p50-µs")
	b.ReportMetric(float64(p)/float64(bi), "x-builtin")
}
