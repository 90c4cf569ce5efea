package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectModern starts a facade in dir and connects the official Go SDK
// to it at protocol 2026-07-28; the session is closed when the test ends.
func connectModern(t *testing.T, sd *stateDir, dir string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(facadeBin, "--state-dir", sd.dir, "--principal", "agent:sdk", "--idle-exit", "1m")
	cmd.Dir = dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "shoal-modern-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("facade stderr:\n%s", stderr.String())
		}
	})
	return cs
}

// TestModernApproval: a 2026-07-28 client has no server-to-client
// requests; shoal_apply of a pending plan answers input_required with the
// approval form, the SDK asks the person (its elicitation handler) and
// calls again with the answer, and the approved plan runs.
func TestModernApproval(t *testing.T) {
	sd := newStateDir(t)
	dir := t.TempDir()
	var shown []string
	cs := connectModern(t, sd, dir, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			shown = append(shown, req.Params.Message)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "ok"}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	// Outside the session's writable paths, so the plan asks.
	build := filepath.Join(testkernel.ShortDir(t), "build")
	os.MkdirAll(build, 0o755)
	plan := call("shoal_plan", map[string]any{"source": "rm -rf " + build})
	call("shoal_apply", map[string]any{"plan": plan["ref"]})
	if len(shown) != 1 || !strings.Contains(shown[0], "rm -rf "+build) {
		t.Fatalf("the person saw %q", shown)
	}
	if m := call("shoal_exec", map[string]any{"source": "test -e " + build + " && echo there || echo gone"}); !strings.Contains(fmt.Sprint(m), "gone") {
		t.Errorf("the approved plan did not run: %v", m)
	}
}

// TestModernGoSDK: the official Go SDK (v1.8.0) speaking the stateless
// 2026-07-28 revision gets answers without falling back to the handshake:
// server/discover, tools, resources, completion, and a resource
// subscription over subscriptions/listen.
func TestModernGoSDK(t *testing.T) {
	sd := newStateDir(t)
	dir := t.TempDir()
	updated := make(chan string, 16)
	cs := connectModern(t, sd, dir, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- req.Params.URI:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	init := cs.InitializeResult()
	if init.ProtocolVersion != "2026-07-28" || init.ServerInfo == nil || init.ServerInfo.Name != "shoal" {
		t.Fatalf("negotiated %q with %+v; want 2026-07-28 through server/discover", init.ProtocolVersion, init.ServerInfo)
	}
	//lint:ignore SA1019 the facade still offers logging in the deprecation window; this checks it does
	if init.Capabilities.Logging == nil || init.Capabilities.Completions == nil || init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
		t.Errorf("capabilities %+v", init.Capabilities)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": "pwd"}})
	if err != nil || res.IsError {
		t.Fatalf("shoal_exec: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), dir) {
		t.Errorf("a stateless client's session runs in %s; want its launch dir %s", b, dir)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "shoal://session/cwd"})
	if err != nil || len(read.Contents) == 0 || !strings.Contains(read.Contents[0].Text, dir) {
		t.Fatalf("resources/read: %v %+v", err, read)
	}
	list, err := cs.ListResources(ctx, nil)
	if err != nil || !slices.ContainsFunc(list.Resources, func(r *sdk.Resource) bool { return r.URI == "shoal://session/cwd" }) {
		t.Fatalf("resources/list: %v", err)
	}
	views, err := cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: "shoal://session/{view}"},
		Argument: sdk.CompleteParamsArgument{Name: "view", Value: "e"}})
	if err != nil || strings.Join(views.Completion.Values, ",") != "env" {
		t.Fatalf("complete view e: %v %+v", err, views)
	}

	// A subscription is a subscriptions/listen stream that stays open.
	subCtx, stopSub := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() { subDone <- cs.Subscribe(subCtx, &sdk.SubscribeParams{URI: "shoal://events/user.modern"}) }()
	deadline := time.Now().Add(waitLong)
	for published := false; !published; {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": `emit user.modern '{"n":1}'`}}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-updated:
			if uri != "shoal://events/user.modern" {
				t.Errorf("update for %s", uri)
			}
			published = true
		case <-time.After(100 * time.Millisecond):
			// The stream may not be open yet: publish again.
		}
		if time.Now().After(deadline) {
			t.Fatal("no notifications/resources/updated on the subscriptions/listen stream")
		}
	}
	stopSub()
	<-subDone
}

// TestModernRoots: a 2026-07-28 client that declares roots is asked for
// them by a round trip (input_required with roots/list) on its first
// tool call, and its session starts in its first root, not where the host
// launched the facade.
func TestModernRoots(t *testing.T) {
	sd := newStateDir(t)
	launch, root := t.TempDir(), t.TempDir()
	c := sdk.NewClient(&sdk.Implementation{Name: "shoal-roots-test", Version: "1"}, nil)
	//lint:ignore SA1019 roots stay supported in the deprecation window; this test is about them
	c.AddRoots(&sdk.Root{URI: "file://" + root, Name: "project"})
	cmd := exec.Command(facadeBin, "--state-dir", sd.dir, "--principal", "agent:sdk", "--idle-exit", "1m")
	cmd.Dir = launch
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": "pwd"}})
	if err != nil || res.IsError {
		t.Fatalf("shoal_exec: %v %+v\n%s", err, res, stderr.String())
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), root) {
		t.Errorf("the session runs in %s; want the client's root %s (launched in %s)", b, root, launch)
	}
}
