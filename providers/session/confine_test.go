package session

import (
	"errors"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// Where the OS cannot confine a session, the policy's mode decides: a
// required sandbox refuses to run, with a coded error saying how to opt
// out; best-effort runs.
func TestUnconfinableSession(t *testing.T) {
	missing := sandbox.Status{Reason: "Landlock is not available in this kernel"}
	for _, tc := range []struct {
		c       confinement
		refused bool
	}{
		{confinement{required: true, status: missing}, true},
		{confinement{required: true, status: sandbox.Status{Confined: true, ABI: 7}}, false},
		{confinement{required: true, status: sandbox.Status{Confined: true, ABI: 7}, err: errors.New("worker failed")}, true},
		{confinement{required: false, status: missing}, false},
	} {
		err := tc.c.refusal("/state")
		if !tc.refused {
			if err != nil {
				t.Errorf("%+v: refused: %v", tc.c, err)
			}
			continue
		}
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != rpc.SandboxUnavailable ||
			!strings.Contains(re.Message, `sandbox = "best-effort"`) || !strings.Contains(re.Message, "/state/policy.toml") {
			t.Errorf("%+v: %v; want SANDBOX_UNAVAILABLE naming the opt-out", tc.c, err)
		}
	}
	v := (&confinement{required: true, status: missing, ws: policy.Workspace{Dir: "/"}}).View()
	if v.Confined || v.Reason != missing.Reason || v.Mode != policy.SandboxRequired || v.WorkspaceWritable == nil || *v.WorkspaceWritable {
		t.Errorf("view %+v", v)
	}
}
