package bus

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

var nameTests = []struct {
	name   string
	valid  bool // ValidateName
	client bool // CheckClientChannel
	hint   string
}{
	{"user.build", true, true, ""},
	{"user.ci.build-2_x.v1", true, true, ""},
	{"user.A.9", true, true, ""},
	{"user." + strings.Repeat("a", 64), true, true, ""},
	{"user." + strings.Repeat("a", 65), false, false, "longer than 64"},
	{"user." + strings.Repeat("a.", 62) + "a", false, false, "limit is 128"},
	{"user", true, false, "user.<name>"},
	{"user.", false, false, "nothing after user."},
	{"user..x", false, false, "empty segment"},
	{"user.x.", false, false, "ends with a dot"},
	{".user.x", false, false, "user.<name>"},
	{"user.x y", false, false, "letters, digits"},
	{"user.x*", false, false, "letters, digits"},
	{"user.é", false, false, "letters, digits"},
	{"user/x", false, false, "user.<name>"},
	{"", false, false, "user.<name>"},
	{"journal", true, false, "belongs to the kernel"},
	{"approval", true, false, "belongs to the kernel"},
	{"render", true, false, "belongs to the kernel"},
	{"session.transcript", true, false, "belongs to the kernel"},
	{"task.9", true, false, "belongs to the kernel"},
	{"task", true, false, "belongs to the kernel"},
	{"tasks.x", true, false, "user.<name>"},
	{"foo.bar", true, false, "user.<name>"},
	{"User.x", true, false, "user.<name>"},
}

func TestValidateName(t *testing.T) {
	for _, tc := range nameTests {
		err := ValidateName(tc.name)
		if (err == nil) != tc.valid {
			t.Errorf("ValidateName(%q) = %v, want valid %v", tc.name, err, tc.valid)
		}
		if err != nil {
			wantCode(t, err, rpc.InvalidParams)
		}
	}
}

// E5: only user.* with a sane suffix is publishable by clients.
func TestPublishClientRules(t *testing.T) {
	b := newTestBus(t, Options{})
	for _, tc := range nameTests {
		ev, err := b.PublishClient(tc.name, json.RawMessage(`{"ok":true}`))
		if tc.client {
			if err != nil || ev.Channel != tc.name {
				t.Errorf("PublishClient(%q): %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("PublishClient(%q) accepted", tc.name)
			continue
		}
		wantCode(t, err, rpc.InvalidParams, tc.hint)
	}
	// Nothing refused left a channel behind.
	for _, c := range b.Channels() {
		if !strings.HasPrefix(c.Name, "user.") {
			t.Errorf("refused publish created channel %s", c.Name)
		}
	}
}

func FuzzValidateName(f *testing.F) {
	for _, tc := range nameTests {
		f.Add(tc.name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		if err != nil {
			return
		}
		if len(name) > MaxNameLen {
			t.Fatalf("accepted %d bytes", len(name))
		}
		for seg := range strings.SplitSeq(name, ".") {
			if seg == "" || len(seg) > MaxSegmentLen || strings.TrimFunc(seg, func(r rune) bool { return r < 128 && isNameChar(byte(r)) }) != "" {
				t.Fatalf("accepted %q with segment %q", name, seg)
			}
		}
		if CheckClientChannel(name) == nil && (!strings.HasPrefix(name, UserPrefix) || IsKernelChannel(name)) {
			t.Fatalf("client may publish on %q", name)
		}
	})
}

// The drop marker's payload shape is reserved, so IsMarker is exact.
func TestMarkerShapeReserved(t *testing.T) {
	b := newTestBus(t, Options{})
	for _, tc := range []struct {
		payload string
		refused bool
	}{
		{`{"dropped":1,"latest_seq":2}`, true},
		{` { "latest_seq" : 9 , "dropped" : "x" } `, true},
		{`{"dropped":1,"latest_seq":2,"also":3}`, false},
		{`{"Dropped":1,"latest_seq":2}`, false},
		{`{"dropped":1}`, false},
		{`[{"dropped":1,"latest_seq":2}]`, false},
		{`{"x":{"dropped":1,"latest_seq":2}}`, false},
	} {
		_, err := b.PublishClient("user.m", json.RawMessage(tc.payload))
		if tc.refused {
			wantCode(t, err, rpc.InvalidParams, "reserved")
		} else if err != nil {
			t.Errorf("payload %s refused: %v", tc.payload, err)
		}
		if _, _, isMarker := IsMarker(Event{Payload: json.RawMessage(tc.payload)}); isMarker != tc.refused && !strings.Contains(tc.payload, `"x"`) {
			t.Errorf("IsMarker(%s) = %v", tc.payload, isMarker)
		}
	}
	m := Marker("user.m", 37, 991, 5)
	if string(m.Payload) != `{"dropped":37,"latest_seq":991}` || m.Seq != 991 || m.Channel != "user.m" || m.TS != 5 {
		t.Fatalf("marker %+v", m)
	}
	if d, l, ok := IsMarker(m); !ok || d != 37 || l != 991 {
		t.Fatalf("IsMarker(marker) = %d %d %v", d, l, ok)
	}
}

// E8: a validator runs before the seq is taken; a rejection publishes
// nothing and uses no seq.
func TestValidatorRejectionUsesNoSeq(t *testing.T) {
	b := newTestBus(t, Options{})
	var calls []string
	requireOK := func(channel string, payload json.RawMessage) error {
		calls = append(calls, channel)
		var p struct{ OK *bool }
		if err := json.Unmarshal(payload, &p); err != nil || p.OK == nil {
			return errors.New(`field "ok" is required`)
		}
		return nil
	}
	trap := func(string, json.RawMessage) error {
		return rpc.Errorf(rpc.PluginError, "wasm trap: unreachable")
	}
	refuse := func(string, json.RawMessage) error {
		return rpc.Errorf(rpc.Rejected, "builds must name a commit")
	}
	err := b.SetUserChannels(false, []UserChannel{
		{Name: "user.ci.*", Validator: "ci-schema", Validate: requireOK},
		{Name: "user.ci.deploy.*", Validator: "deploy-guard", Validate: refuse},
		{Name: "user.ci.free"}, // exact beats the pattern: no validator
		{Name: "user.trap", Validator: "broken", Validate: trap},
	})
	if err != nil {
		t.Fatal(err)
	}
	sub := collect(t, b, "user.ci.build")

	_, err = b.PublishClient("user.ci.build", json.RawMessage(`{"passed":3}`))
	wantCode(t, err, rpc.Rejected, `validator "ci-schema"`, `field "ok" is required`, "user.ci.build", "nothing was published")
	res := mustRead(t, b, "user.ci.build", nil, 0)
	if len(res.Events) != 0 || res.NextSeq != 0 || res.LatestSeq != nil {
		t.Fatalf("a rejected payload left a trace: %+v", res)
	}
	ev, err := b.PublishClient("user.ci.build", json.RawMessage(`{"ok":true}`))
	if err != nil || ev.Seq != 0 {
		t.Fatalf("accepted payload: seq %d, %v", ev.Seq, err)
	}
	if got := sub.wait(1); len(got) != 1 || got[0].Seq != 0 {
		t.Fatalf("subscriber saw %v", got)
	}

	_, err = b.PublishClient("user.ci.deploy.prod", json.RawMessage(`{"ok":true}`))
	wantCode(t, err, rpc.Rejected, `validator "deploy-guard"`, "builds must name a commit")
	if _, err = b.PublishClient("user.ci.free", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("undeclared validator ran on user.ci.free: %v", err)
	}
	_, err = b.PublishClient("user.trap", nil)
	wantCode(t, err, rpc.PluginError, `validator "broken"`, "wasm trap")
	if n := mustRead(t, b, "user.trap", nil, 0).NextSeq; n != 0 {
		t.Fatalf("a failed validator used seq: next %d", n)
	}
	if strings.Join(calls, " ") != "user.ci.build user.ci.build" {
		t.Fatalf("validator calls %v", calls)
	}
	// The kernel's own publish is not validated.
	if _, err := b.Publish("user.ci.build", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
}

// E8: strict mode refuses undeclared user.* channels.
func TestStrictMode(t *testing.T) {
	b := newTestBus(t, Options{})
	decls := []UserChannel{{Name: "user.build"}, {Name: "user.ci.*"}}
	if err := b.SetUserChannels(true, decls); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		channel string
		ok      bool
	}{
		{"user.build", true},
		{"user.ci.x", true},
		{"user.ci.x.y", true},
		{"user.ci", false},
		{"user.build.more", false},
		{"user.other", false},
	} {
		_, err := b.PublishClient(tc.channel, nil)
		if tc.ok {
			if err != nil {
				t.Errorf("%s refused: %v", tc.channel, err)
			}
			continue
		}
		wantCode(t, err, rpc.InvalidParams, "strict mode", "user.build, user.ci.*", "[[events.channel]]")
	}
	// Turning strict off lets undeclared channels through again.
	if err := b.SetUserChannels(false, decls); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishClient("user.other", nil); err != nil {
		t.Fatal(err)
	}
	// A catch-all pattern declares every user channel.
	if err := b.SetUserChannels(true, []UserChannel{{Name: "user.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishClient("user.anything.at.all", nil); err != nil {
		t.Fatal(err)
	}
}

func TestSetUserChannelsRefusesBadDeclarations(t *testing.T) {
	noop := func(string, json.RawMessage) error { return nil }
	for _, tc := range []struct {
		decls []UserChannel
		hint  string
	}{
		{[]UserChannel{{Name: "journal"}}, "belongs to the kernel"},
		{[]UserChannel{{Name: "user.x"}, {Name: "user.x"}}, "declared twice"},
		{[]UserChannel{{Name: "user.x*"}}, "'*' may only follow a dot"},
		{[]UserChannel{{Name: "task.*"}}, "belongs to the kernel"},
		{[]UserChannel{{Name: "user.a..*"}}, "ends with a dot"},
		{[]UserChannel{{Name: "user.x", Validator: "schema"}}, `validator "schema" is not loaded`},
		{[]UserChannel{{Name: "user.x", Validate: noop}}, "needs a validator name"},
	} {
		b := newTestBus(t, Options{})
		if err := b.SetUserChannels(true, []UserChannel{{Name: "user.kept"}}); err != nil {
			t.Fatal(err)
		}
		err := b.SetUserChannels(false, tc.decls)
		if err == nil || !strings.Contains(err.Error(), tc.hint) {
			t.Errorf("SetUserChannels(%+v) = %v, want an error with %q", tc.decls, err, tc.hint)
		}
		// The previous declarations stay in force.
		if _, err := b.PublishClient("user.other", nil); err == nil {
			t.Errorf("a refused declaration replaced the strict set")
		}
	}
}
