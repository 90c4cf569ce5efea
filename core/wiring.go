package core

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Key names a service of type T that one provider (or the kernel) offers
// and others need. Each key is declared once, as a package variable: in
// core for the services of core's interfaces, else in the package that
// owns T. The name is what start-up errors and docs call the service.
type Key[T any] struct{ name string }

// NewKey declares the key of a service of type T.
func NewKey[T any](name string) Key[T] { return Key[T]{name: name} }

// Name is the service's name.
func (k Key[T]) Name() string { return k.name }

// String is the name and type, e.g. "journal" (core.Journal).
func (k Key[T]) String() string {
	return fmt.Sprintf("%q (%s)", k.name, reflect.TypeFor[T]())
}

func (Key[T]) key() {}

// AnyKey is a [Key] of any type: what a provider's Offers lists.
type AnyKey interface {
	Name() string
	String() string
	key()
}

// Dependency is one service a party needs, and where to put it: made by
// [Need] or [Optional].
type Dependency struct {
	key      AnyKey
	optional bool
	set      func(svc any)
	// done is set once the need is: Resolve does not write it again,
	// so a goroutine started in Provision may read it.
	done *bool
}

// Need declares that the service k names is required: the kernel refuses
// to start without it, and sets *into to it at start-up.
func Need[T any](k Key[T], into *T) Dependency {
	done := new(bool)
	return Dependency{key: k, done: done, set: func(svc any) { *into, *done = svc.(T), true }}
}

// Optional declares that the service k names is used when offered: *into
// stays the zero value when no provider offers it. No provider may offer
// it twice either.
func Optional[T any](k Key[T], into *T) Dependency {
	d := Need(k, into)
	d.optional = true
	return d
}

// Key is the service d needs.
func (d Dependency) Key() AnyKey { return d.key }

// Offerer is implemented by providers that offer services: Offers lists
// every key the provider may [Offer] in Provision (a provider may leave
// one unoffered, e.g. the cluster when none is configured; who needs it
// then must need it as [Optional]).
type Offerer interface {
	Offers() []AnyKey
}

// Needer is implemented by providers that use other providers' services.
// Needs is called once, before Provision. The kernel sets each need just
// before the provider's Provision when its offerer was provisioned
// earlier (or is the kernel), and every need before the kernel serves:
// Provision may use only the services offered before it.
type Needer interface {
	Needs() []Dependency
}

// Party is one side of the service wiring: a provider, named by its
// family, or the kernel itself.
type Party struct {
	Name   string
	Offers []AnyKey
	Needs  []Dependency
}

// PartyOf is p's side of the wiring.
func PartyOf(p Provider) Party {
	pt := Party{Name: p.Family()}
	if o, ok := p.(Offerer); ok {
		pt.Offers = o.Offers()
	}
	if n, ok := p.(Needer); ok {
		pt.Needs = n.Needs()
	}
	return pt
}

// CheckWiring is the start-up check of the parties' declarations: every
// service offered by one party only, every required need offered by one,
// and a name used with one type only. Each problem names the service,
// the parties needing it and the parties offering it.
func CheckWiring(parties []Party) error {
	offerers := map[string][]string{}
	needers := map[string][]string{}  // every party needing it
	requires := map[string][]string{} // those that cannot do without
	keys := map[string]AnyKey{}
	var errs []error
	sameKey := func(k AnyKey, party string) {
		if prev, ok := keys[k.Name()]; ok && prev.String() != k.String() {
			errs = append(errs, fmt.Errorf("service %q is declared as both %s and %s (by %s)", k.Name(), prev, k, party))
		}
		keys[k.Name()] = k
	}
	for _, p := range parties {
		for _, k := range p.Offers {
			sameKey(k, p.Name)
			offerers[k.Name()] = append(offerers[k.Name()], p.Name)
		}
		for _, d := range p.Needs {
			sameKey(d.key, p.Name)
			needers[d.key.Name()] = append(needers[d.key.Name()], p.Name)
			if !d.optional {
				requires[d.key.Name()] = append(requires[d.key.Name()], p.Name)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		by, need := offerers[name], needers[name]
		switch {
		case len(by) > 1:
			errs = append(errs, fmt.Errorf("service %s is offered by %s: exactly one provider may offer it%s", keys[name], strings.Join(by, " and "), neededBy(need)))
		case len(by) == 0 && len(requires[name]) > 0:
			errs = append(errs, fmt.Errorf("service %s, needed by %s, is offered by no provider", keys[name], strings.Join(requires[name], " and ")))
		}
	}
	return errors.Join(errs...)
}

func neededBy(needers []string) string {
	if len(needers) == 0 {
		return ""
	}
	return " (needed by " + strings.Join(needers, " and ") + ")"
}

// Provision sets p's needs that are offered on h already, calls its
// Provision when it is a [Provisioner], and checks that it offered only
// services its Offers declares.
func Provision(h *Host, p Provider, pt Party) error {
	for _, d := range pt.Needs {
		if svc, ok := h.get(d.key.Name()); ok {
			d.set(svc)
		}
	}
	pv, ok := p.(Provisioner)
	if !ok {
		return nil
	}
	n, _ := h.offersSince(0)
	if err := pv.Provision(h); err != nil {
		return err
	}
	_, added := h.offersSince(n)
	for _, k := range added {
		if !slices.ContainsFunc(pt.Offers, func(o AnyKey) bool { return o.Name() == k.Name() }) {
			return fmt.Errorf("it offered service %s, which its Offers does not list", k)
		}
	}
	return nil
}

// Resolve sets every need of the parties from h, once all are
// provisioned. A required service that its offerer did not offer is an
// error naming both.
func Resolve(h *Host, parties []Party) error {
	var errs []error
	for _, p := range parties {
		for _, d := range p.Needs {
			svc, ok := h.get(d.key.Name())
			switch {
			case *d.done:
			case ok:
				d.set(svc)
			case !d.optional:
				errs = append(errs, fmt.Errorf("service %s, needed by %s, was not offered by %s", d.key, p.Name, strings.Join(offering(parties, d.key.Name()), " and ")))
			}
		}
	}
	return errors.Join(errs...)
}

// offering names the parties declaring an offer of the service name.
func offering(parties []Party, name string) []string {
	var by []string
	for _, p := range parties {
		if slices.ContainsFunc(p.Offers, func(k AnyKey) bool { return k.Name() == name }) {
			by = append(by, p.Name)
		}
	}
	if by == nil {
		by = []string{"any provider"}
	}
	return by
}

// Starter is implemented by providers with work to begin once every
// need is set, such as a background loop using a service that a provider
// later in the list offers. The kernel calls Start after every Provision
// and [Resolve], in provisioning order.
type Starter interface {
	Start() error
}

// Wire provisions, resolves and starts ps on h in order, as the kernel
// does at start-up (less routing): the services already offered on h
// count as the party "host"'s. Tests and tools that run providers without
// a kernel use it.
func Wire(h *Host, ps ...Provider) error {
	_, pre := h.offersSince(0)
	parties := []Party{{Name: "host", Offers: pre}}
	for _, p := range ps {
		parties = append(parties, PartyOf(p))
	}
	if err := CheckWiring(parties); err != nil {
		return err
	}
	for i, p := range ps {
		if err := Provision(h, p, parties[i+1]); err != nil {
			return fmt.Errorf("provision %s: %w", p.Family(), err)
		}
	}
	if err := Resolve(h, parties); err != nil {
		return err
	}
	return StartAll(ps)
}

// StartAll calls Start on each of ps that is a [Starter], in order.
func StartAll(ps []Provider) error {
	for _, p := range ps {
		if s, ok := p.(Starter); ok {
			if err := s.Start(); err != nil {
				return fmt.Errorf("start %s: %w", p.Family(), err)
			}
		}
	}
	return nil
}
