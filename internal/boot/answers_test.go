package boot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/statedir"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/providers/plan"
	"github.com/shoal-sh/shoal/sdk/client"
)

// fill sets every exported member of v, recursively, to a value that is
// not zero, so that omitempty members appear when it is encoded.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"k":1}`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// sameOnTheWire requires theirs, a provider's answer type, and ours, its
// core/wire type, to encode alike: theirs, zero and filled, decodes
// strictly into ours (no member ours lacks, no type ours refuses) and
// ours encodes back to the same bytes (same members, order, omitempty).
func sameOnTheWire(t *testing.T, theirs, ours any) {
	t.Helper()
	for _, filled := range []bool{false, true} {
		v := reflect.New(reflect.TypeOf(theirs))
		if filled {
			fill(v.Elem())
		}
		want, err := json.Marshal(v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		w := reflect.New(reflect.TypeOf(ours))
		if err := rpc.DecodeParams(want, w.Interface()); err != nil {
			t.Errorf("%T (filled %v) does not decode as %T: %v\n%s", theirs, filled, ours, err, want)
			continue
		}
		got, err := json.Marshal(w.Interface())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T (filled %v) and %T encode differently:\n%s\n%s", theirs, filled, ours, want, got)
		}
	}
}

// TestAnswersMatchWire: the answers providers declare in their own
// packages are, member for member, the core/wire types clients decode.
// (Answers built from core/wire types directly need no check.)
func TestAnswersMatchWire(t *testing.T) {
	for _, c := range []struct{ theirs, ours any }{
		{plan.Record{}, wire.Plan{}},
		{plan.List{}, wire.PlanList{}},
		{journal.QueryResult{}, wire.JournalRows{}},
		{journal.ClusterResult{}, wire.ClusterJournalRows{}},
		{core.JournalStats{}, wire.JournalStats{}},
		{bus.ReadResult{}, wire.Page{}},
		{bus.Event{}, wire.Event{}},
		{core.Resource{}, wire.Resource{}},
		{core.Template{}, wire.Template{}},
	} {
		sameOnTheWire(t, c.theirs, c.ours)
	}
}

// attachAnswer checks session.attach's answer as the calls of
// TestAnswersAreWireTypes are checked: client.Dial decodes it, but not
// strictly and not into bytes, so the test attaches on a connection of
// its own.
func attachAnswer(t *testing.T, dir, work string) {
	t.Helper()
	o := client.Options{StateDir: dir}
	tok, err := statedir.ReadToken(dir, statedir.TokenName)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("unix", o.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	conn := rpc.NewConn(nc, rpc.ConnOptions{})
	ran := make(chan error, 1)
	go func() { ran <- conn.Run() }()
	defer func() { conn.Close(); <-ran }()
	var raw json.RawMessage
	if err := conn.Call(context.Background(), "session.attach", map[string]string{"token": tok, "workspace": work}, &raw); err != nil {
		t.Fatal(err)
	}
	var a wire.Attached
	if err := rpc.DecodeParams(raw, &a); err != nil {
		t.Fatalf("session.attach answer does not decode as wire.Attached: %v\n%s", err, raw)
	}
	if a.Confinement == nil {
		t.Fatalf("session.attach answers no confinement: %s", raw)
	}
	again, err := encodeFrame(a)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Errorf("session.attach: wire.Attached encodes differently from the answer:\n%s\n%s", raw, again)
	}
}

// encodeFrame encodes v as the kernel's frames do.
func encodeFrame(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// TestAnswersAreWireTypes: the answers of a live kernel decode strictly
// into their core/wire types and encode back to the same bytes, so the
// types clients decode are the kernel's answers exactly.
func TestAnswersAreWireTypes(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	work := t.TempDir()
	c := attach(t, dir, client.Options{Workspace: work})
	human := attach(t, dir, client.Options{Principal: "human:op", Workspace: work})
	ctx := context.Background()
	// A delete outside the session's writable paths needs approval (the
	// path does not exist: applying it removes nothing).
	victim := filepath.Join(shortDir(t), "none")
	asked := func() string {
		var p wire.Plan
		if err := c.Call(ctx, "plan.create", map[string]any{"source": "rm -rf " + victim}, &p); err != nil {
			t.Fatal(err)
		}
		if p.Verdict != "ask" {
			t.Fatalf("plan of rm -rf: verdict %s, want ask", p.Verdict)
		}
		return p.Ref
	}
	toApprove, toReject := asked(), asked()
	var put wire.BlobPut
	if err := c.Call(ctx, "blob.put", map[string]any{"text": "hello"}, &put); err != nil {
		t.Fatal(err)
	}
	var pl wire.Plan
	if err := c.Call(ctx, "plan.create", map[string]any{"source": "rm -rf build"}, &pl); err != nil {
		t.Fatal(err)
	}
	var bg wire.ExecReply
	if err := c.Call(ctx, "exec", map[string]any{"source": "sleep 30", "background": true}, &bg); err != nil {
		t.Fatal(err)
	}
	var scr wire.Screen
	if err := c.Call(ctx, "pty.open", map[string]any{"command": "cat"}, &scr); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		method string
		params any
		into   any
		by     *client.Client // default c
	}{
		{"plan.approve", map[string]any{"ref": toApprove}, &wire.Plan{}, human},
		{"plan.reject", map[string]any{"ref": toReject, "reason": "no"}, &wire.Plan{}, human},
		{"plan.apply", map[string]any{"ref": toApprove}, &wire.ExecReply{}, nil},
		{"plan.create", map[string]any{"source": "ls"}, &wire.Plan{}, nil},
		{"pty.open", map[string]any{"command": "cat"}, &wire.Screen{}, nil},
		{"resources.read", map[string]any{"uri": "shoal://session/cwd"}, &wire.ReadResult{}, nil},
		{"blob.put", map[string]any{"text": "hello"}, &wire.BlobPut{}, nil},
		{"task.get", map[string]any{"task": bg.Task}, &wire.Task{}, nil},
		{"task.cancel", map[string]any{"task": bg.Task}, &wire.Task{}, nil},
		{"pty.read", map[string]any{"pty": scr.PTY}, &wire.Screen{}, nil},
		{"pty.resize", map[string]any{"pty": scr.PTY, "cols": 90, "rows": 20}, &wire.Screen{}, nil},
		{"pty.write", map[string]any{"pty": scr.PTY, "input": "hi\n"}, &wire.Screen{}, nil},
		{"pty.wait", map[string]any{"pty": scr.PTY, "pattern": "hi", "timeout_ms": 5000}, &wire.Screen{}, nil},
		{"pty.close", map[string]any{"pty": scr.PTY}, &wire.PTYClosed{}, nil},
		{"kernel.status", nil, &wire.Status{}, nil},
		{"session.view", map[string]any{"view": "cwd"}, &wire.CwdView{}, nil},
		{"session.view", map[string]any{"view": "env"}, &wire.EnvView{}, nil},
		{"session.view", map[string]any{"view": "reef"}, &wire.ReefView{}, nil},
		{"plugin.list", nil, &wire.PluginList{}, nil},
		{"resources.list", nil, &wire.ResourceList{}, nil},
		{"resources.templates", nil, &wire.TemplateList{}, nil},
		{"exec", map[string]any{"source": "echo hi"}, &wire.ExecReply{}, nil},
		{"value.get", map[string]any{"target": "out:1"}, &wire.ReadResult{}, nil},
		{"exec.progress", map[string]any{"key": "none"}, &wire.Progress{}, nil},
		{"events.publish", map[string]any{"channel": "user.answers", "payload": map[string]int{"n": 1}}, &wire.Published{}, nil},
		{"events.read", map[string]any{"channel": "user.answers"}, &wire.Page{}, nil},
		{"events.subscribe", map[string]any{"channel": "user.answers"}, &wire.Subscribed{}, nil},
		{"events.unsubscribe", map[string]any{"channel": "user.answers"}, &wire.Unsubscribed{}, nil},
		{"wait", map[string]any{"target": "shoal://events/user.answers", "until": 0, "timeout_ms": 1}, &wire.WaitResult{}, nil},
		{"blob.get", map[string]any{"hash": put.Hash}, &wire.BlobGet{}, nil},
		{"blob.get", map[string]any{"hash": put.Hash, "offset": 1, "length": 2}, &wire.BlobRange{}, nil},
		{"blob.put", map[string]any{"text": "x", "more": true}, &wire.BlobUpload{}, nil},
		{"task.list", nil, &wire.TaskList{}, nil},
		{"plan.get", map[string]any{"ref": pl.Ref}, &wire.Plan{}, nil},
		{"plan.list", nil, &wire.PlanList{}, nil},
		{"pty.list", nil, &wire.PTYList{}, nil},
		{"journal.query", map[string]any{"limit": 3}, &wire.JournalRows{}, nil},
		{"session.close", nil, &wire.SessionClosed{}, nil},
	}
	covered := map[string]bool{"session.attach": true} // attachAnswer below
	attachAnswer(t, dir, work)
	for _, call := range calls {
		covered[call.method] = true
		by := call.by
		if by == nil {
			by = c
		}
		var raw json.RawMessage
		if err := by.Call(ctx, call.method, call.params, &raw); err != nil {
			t.Errorf("%s: %v", call.method, err)
			continue
		}
		if err := rpc.DecodeParams(raw, call.into); err != nil {
			t.Errorf("%s answer does not decode as %T: %v\n%s", call.method, call.into, err, raw)
			continue
		}
		again, err := encodeFrame(call.into)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, raw) {
			t.Errorf("%s: %T encodes differently from the answer:\n%s\n%s", call.method, call.into, raw, again)
		}
	}
	var st wire.Status
	if err := c.Call(ctx, "kernel.status", nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Methods {
		if !covered[m] {
			t.Errorf("method %s has no call here: add one with its wire type", m)
		}
	}
}
