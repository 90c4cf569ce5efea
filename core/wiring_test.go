package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/uri"
)

// svc is a test service type; its key is declared once, as providers do.
type svc interface{ Hello() string }

type hello string

func (h hello) Hello() string { return string(h) }

var (
	serviceHello = core.NewKey[svc]("hello")
	// serviceHelloString clashes with serviceHello: same name, other type.
	serviceHelloString = core.NewKey[string]("hello")
)

// fam is a provider that offers and needs what it is told. Offering
// nothing it declares models a provider whose service is configured off.
type fam struct {
	name     string
	offers   []core.AnyKey
	offer    bool // offer serviceHello in Provision
	need     bool
	optional bool
	got      svc
	// seen is what Provision saw of the need.
	seen svc
}

func (f *fam) Family() string                                              { return f.name }
func (f *fam) Templates() []core.Template                                  { return nil }
func (f *fam) List(context.Context, *core.Caller) ([]core.Resource, error) { return nil, nil }
func (f *fam) Read(context.Context, *core.Caller, *uri.URI) (*core.Content, error) {
	return nil, errors.New("nothing to read")
}
func (f *fam) Offers() []core.AnyKey { return f.offers }
func (f *fam) Needs() []core.Dependency {
	switch {
	case f.optional:
		return []core.Dependency{core.Optional(serviceHello, &f.got)}
	case f.need:
		return []core.Dependency{core.Need(serviceHello, &f.got)}
	}
	return nil
}
func (f *fam) Provision(h *core.Host) error {
	f.seen = f.got
	if f.offer {
		core.Offer[svc](h, serviceHello, hello("from "+f.name))
	}
	return nil
}

func offerer(name string) *fam {
	return &fam{name: name, offers: []core.AnyKey{serviceHello}, offer: true}
}

func TestWireSetsNeeds(t *testing.T) {
	early, late := &fam{name: "early", need: true}, &fam{name: "late", need: true}
	if err := core.Wire(&core.Host{}, early, offerer("a"), late); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*fam{early, late} {
		if f.got == nil || f.got.Hello() != "from a" {
			t.Fatalf("%s: need not set: %v", f.name, f.got)
		}
	}
	// A need is set before Provision when its offerer came first.
	if early.seen != nil || late.seen == nil {
		t.Fatalf("in Provision early saw %v, late %v", early.seen, late.seen)
	}
	if got, ok := core.Get(&core.Host{}, serviceHello); ok || got != nil {
		t.Fatal("an empty host has a service")
	}
}

func TestWiringErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		ps   []core.Provider
		want []string // each must appear in the error; none: no error
	}{
		{"missing", []core.Provider{&fam{name: "user", need: true}},
			[]string{`service "hello" (core_test.svc), needed by user, is offered by no provider`}},
		{"duplicate", []core.Provider{offerer("one"), &fam{name: "user", need: true}, offerer("two")},
			[]string{`service "hello" (core_test.svc) is offered by one and two`, "needed by user"}},
		{"duplicate nobody needs", []core.Provider{offerer("one"), offerer("two")},
			[]string{`is offered by one and two: exactly one provider may offer it`}},
		{"optional and missing", []core.Provider{&fam{name: "user", optional: true}}, nil},
		{"declared, not offered, optional", []core.Provider{
			&fam{name: "off", offers: []core.AnyKey{serviceHello}}, &fam{name: "user", optional: true}}, nil},
		{"declared, not offered, required", []core.Provider{
			&fam{name: "off", offers: []core.AnyKey{serviceHello}}, &fam{name: "user", need: true}},
			[]string{`service "hello" (core_test.svc), needed by user, was not offered by off`}},
		{"offered, not declared", []core.Provider{&fam{name: "sly", offer: true}},
			[]string{`provision sly: it offered service "hello" (core_test.svc), which its Offers does not list`}},
		{"one name, two types", []core.Provider{offerer("one"), &fam{name: "other", offers: []core.AnyKey{serviceHelloString}}},
			[]string{`service "hello" is declared as both "hello" (core_test.svc) and "hello" (string) (by other)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := core.Wire(&core.Host{}, tc.ps...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// A service offered on the host before Wire (by the kernel, or a test)
// counts as offered by "host": a provider offering it too is a duplicate.
func TestWireCountsHostOffers(t *testing.T) {
	h := &core.Host{}
	core.Offer[svc](h, serviceHello, hello("from the host"))
	user := &fam{name: "user", need: true}
	if err := core.Wire(h, user); err != nil || user.got.Hello() != "from the host" {
		t.Fatalf("host's service: %v, %v", user.got, err)
	}
	err := core.Wire(&core.Host{}, offerer("one"))
	if err != nil {
		t.Fatal(err)
	}
	h2 := &core.Host{}
	core.Offer[svc](h2, serviceHello, hello("x"))
	if err := core.Wire(h2, offerer("one")); err == nil || !strings.Contains(err.Error(), "offered by host and one") {
		t.Fatalf("duplicate of a host service: %v", err)
	}
}
