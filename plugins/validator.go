package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/tetratelabs/wazero/api"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/clip"
	"github.com/shoal-sh/shoal/sdk/abi"
)

// noLoader refuses every $ref outside the schema itself: a plugin's
// schema must not make the kernel read files or fetch URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema refers to %s; plugin schemas must be self-contained", url)
}

func compileSchema(name string, schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	url := "shoal-plugin:///" + name + "/schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("not a usable JSON Schema: %v", firstLine(err))
	}
	return sch, nil
}

// Validator returns the validator plugin called name as a bus validator.
// The bus calls it before publishing on a channel bound to it in
// config.toml ([[events.channel]] validator = "name").
//
// The returned func answers nil to accept, an *rpc.Error REJECTED whose
// message is the reason (the schema's complaint or the plugin's) to
// refuse, and an *rpc.Error PLUGIN_ERROR when the plugin could not give a
// verdict (trap, deadline, malformed answer) or is bound to a channel it
// does not declare.
func (s *Set) Validator(name string) (bus.Validator, bool) {
	p := s.validator(name)
	if p == nil {
		return nil, false
	}
	return p.validatePayload, true
}

// Bind is Validator for a channel an operator binds to it, refusing at
// start what every publish would refuse: a name that is not a validator
// plugin, and a channel (not a pattern) outside the channels its manifest
// declares. A pattern binding is checked per channel at publish.
func (s *Set) Bind(name, channel string) (bus.Validator, error) {
	p := s.validator(name)
	if p == nil {
		var names []string
		for _, q := range s.plugins {
			if q.man.Kind == KindValidator {
				names = append(names, q.name)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("validator %q is not a loaded validator plugin (none is loaded)", name)
		}
		return nil, fmt.Errorf("validator %q is not a loaded validator plugin (loaded: %s)", name, strings.Join(names, ", "))
	}
	if !strings.HasSuffix(channel, "*") && !p.handles(channel) {
		return nil, fmt.Errorf("validator %q declares channels %s, not %s: bind it only to those", name, strings.Join(p.man.Validator.Channels, ", "), channel)
	}
	return p.validatePayload, nil
}

// validator is the validator plugin called name, or nil.
func (s *Set) validator(name string) *plugin {
	if p, ok := s.byName[name]; ok && p.man.Kind == KindValidator {
		return p
	}
	return nil
}

func (p *plugin) validatePayload(channel string, payload json.RawMessage) error {
	if !p.handles(channel) {
		p.calls.Add(1)
		return p.failed(context.Background(), pluginError(p.name, "validator declares channels %s, not %s: bind it in config.toml only to those", strings.Join(p.man.Validator.Channels, ", "), channel))
	}
	// The schema and the guest come with the load: a publish waits for it.
	// The load is bounded (compiling ends, and starting an instance and
	// describing have the init deadline), and Close ends the wait.
	if err := p.wait(context.Background()); err != nil {
		p.calls.Add(1)
		return err
	}
	if p.schema != nil {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
		if err != nil {
			return rpc.Errorf(rpc.Rejected, "the payload is not valid JSON: %v", err)
		}
		if err := p.schema.Validate(inst); err != nil {
			return rpc.Errorf(rpc.Rejected, "the payload does not match the channel's schema: %s", schemaReason(err))
		}
	} else if !json.Valid(payload) {
		return rpc.Errorf(rpc.Rejected, "the payload is not valid JSON")
	}
	// The payload is valid JSON: it is spliced in as it is, not re-encoded,
	// in the layout abi.ValidateHead describes (the quoted channel name
	// opens with the head's last quote).
	ch, _ := json.Marshal(channel)
	req := make([]byte, 0, len(ch)+len(payload)+24)
	req = append(append(append(req, strings.TrimSuffix(abi.ValidateHead, `"`)...), ch...), abi.ValidatePayload...)
	req = append(append(req, payload...), '}')
	env, err := p.invoke(context.Background(), func(in *instance) api.Function { return in.validate }, req)
	if err != nil {
		return err
	}
	if env.OK {
		return nil
	}
	if env.Error.Code == guestRejected {
		return rpc.Errorf(rpc.Rejected, "%s", clip.String(env.Error.Message, 2000))
	}
	return p.failed(context.Background(), pluginError(p.name, "validator failed: %s: %s", env.Error.Code, clip.String(env.Error.Message, 1000)))
}

func (p *plugin) handles(channel string) bool {
	for _, pat := range p.man.Validator.Channels {
		if matchChannel(pat, channel) {
			return true
		}
	}
	return false
}

var printer = message.NewPrinter(language.English)

// schemaReason flattens a schema error to one line: each failing place
// with its complaint.
func schemaReason(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			at := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", at, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return clip.String(strings.Join(parts, "; "), 2000)
}
