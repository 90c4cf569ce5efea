package core

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/uri"
)

// listProvider lists through its list func.
type listProvider struct {
	family string
	list   func(ctx context.Context) ([]Resource, error)
}

func (p listProvider) Family() string        { return p.family }
func (p listProvider) Templates() []Template { return nil }
func (p listProvider) List(ctx context.Context, _ *Caller) ([]Resource, error) {
	return p.list(ctx)
}
func (p listProvider) Read(context.Context, *Caller, *uri.URI) (*Content, error) {
	return nil, errors.New("not readable")
}

// TestListConcurrentDeadline: a provider whose List hangs (even one that
// ignores its context) costs the listing only the deadline: the others'
// resources come back, with a warning naming the slow one; a failing or
// panicking provider is reported beside them.
func TestListConcurrentDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r := NewRouter()
	r.ListTimeout = 20 * time.Millisecond
	for _, p := range []listProvider{
		{"fast", func(context.Context) ([]Resource, error) {
			return []Resource{{URI: "shoal://fast", Name: "fast"}, {URI: "shoal://fast/1", Name: "one"}}, nil
		}},
		{"hang", func(context.Context) ([]Resource, error) {
			<-release // ignores its context
			return []Resource{{URI: "shoal://hang/late"}}, nil
		}},
		{"broken", func(context.Context) ([]Resource, error) { return nil, errors.New("no such table") }},
		{"panics", func(context.Context) ([]Resource, error) { panic("boom") }},
		{"also", func(context.Context) ([]Resource, error) { return []Resource{{URI: "shoal://also"}}, nil }},
	} {
		if err := r.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	res, err := r.List(context.Background(), &Caller{Session: "s"})
	var uris []string
	for _, x := range res {
		uris = append(uris, x.URI)
	}
	if strings.Join(uris, " ") != "shoal://fast shoal://also shoal://fast/1" {
		t.Fatalf("listed %v", uris)
	}
	if err == nil {
		t.Fatal("no warning")
	}
	for _, want := range []string{"hang: did not list within 20ms", "broken: no such table", "panics: list panicked: boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("warning %q lacks %q", err, want)
		}
	}
}
