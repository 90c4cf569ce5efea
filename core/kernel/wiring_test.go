package kernel_test

import (
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/policy"
)

// needy needs the journal, which no provider of its kernel offers.
type needy struct {
	tableProvider
	journal core.Journal
}

func (*needy) Family() string { return "needy" }
func (n *needy) Needs() []core.Dependency {
	return []core.Dependency{core.Need(core.ServiceJournal, &n.journal)}
}

// policyUser uses the policy.
type policyUser struct {
	tableProvider
	policy *policy.Policy
}

func (*policyUser) Family() string { return "user" }
func (u *policyUser) Needs() []core.Dependency {
	return []core.Dependency{core.Optional(core.ServicePolicy, &u.policy)}
}

// policyOfferer offers the policy, which the kernel offers itself.
type policyOfferer struct{ tableProvider }

func (policyOfferer) Family() string             { return "rogue" }
func (policyOfferer) Offers() []core.AnyKey      { return []core.AnyKey{core.ServicePolicy} }
func (policyOfferer) Provision(*core.Host) error { return nil }

// The kernel checks the wiring before it provisions anything: a service
// needed and offered by none, or offered twice, is a start-up error
// naming the service, who needs it and who offers it.
func TestStartRefusesBadWiring(t *testing.T) {
	for _, tc := range []struct {
		name string
		ps   []core.Provider
		want string
	}{
		{"missing", []core.Provider{tableProvider{}, &needy{}},
			`wire services: service "journal" (core.Journal), needed by needy, is offered by no provider`},
		{"duplicate", []core.Provider{&policyUser{}, policyOfferer{}},
			`wire services: service "policy" (*policy.Policy) is offered by kernel and rogue: exactly one provider may offer it (needed by user)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := kernel.New(kernel.Options{StateDir: shortDir(t)}, tc.ps...)
			if err == nil {
				k.Stop()
				t.Fatal("the kernel started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant %q", err, tc.want)
			}
		})
	}
}
