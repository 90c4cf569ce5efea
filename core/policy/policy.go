package policy

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// DefaultTOML is the built-in policy, in the same format as a policy file.
// docs/policy.md shows it in full.
//
//go:embed default.toml
var DefaultTOML string

// Policy is a loaded policy: ordered rules and grants. It is immutable
// after Load and safe for concurrent use.
type Policy struct {
	// Origin says where the rules came from, for messages: a file path,
	// or "built-in default".
	Origin  string
	rules   []*rule
	grants  []grant
	sandbox Sandbox
}

type grant struct {
	pattern string
	names   []string
}

// rule is one compiled [[rule]] table.
type rule struct {
	label      string
	principals []string // empty: any
	effects    []string // empty: any ("*")
	targets    []string // empty: any
	heads      []string
	subs       []string
	flags      []flagCond
	confined   *bool // nil: whether or not the run is confined
	verdict    string
	// wantsDynamic records that the rule names the dynamic flag positively:
	// only such a rule may allow a dynamic effect.
	wantsDynamic bool
}

type flagCond struct {
	name string
	want bool
}

// fileDoc is the TOML shape of a policy file.
type fileDoc struct {
	Defaults *bool               `toml:"defaults"`
	Grants   map[string][]string `toml:"grants"`
	Rules    []ruleDoc           `toml:"rule"`
	Sandbox  sandboxDoc          `toml:"sandbox"`
}

type ruleDoc struct {
	Name      string   `toml:"name"`
	Principal any      `toml:"principal"`
	Effect    any      `toml:"effect"`
	Target    any      `toml:"target"`
	Head      any      `toml:"head"`
	Sub       any      `toml:"sub"`
	Flags     []string `toml:"flags"`
	Confined  *bool    `toml:"confined"`
	Verdict   string   `toml:"verdict"`
}

var builtin *Policy

func init() {
	p, err := parse(DefaultTOML, "built-in default", false)
	if err != nil {
		panic("policy: built-in default does not load: " + err.Error())
	}
	builtin = p
}

// Sandbox returns the policy's [sandbox] section (the default one when the
// file has none).
func (p *Policy) Sandbox() *Sandbox { return &p.sandbox }

// Default returns the built-in policy.
func Default() *Policy { return builtin }

// Load reads a policy file. A missing file is the built-in default. A
// malformed file is an error naming the line and the reason: unknown keys,
// verdicts, effects, flags or grants are refused rather than ignored, so a
// typo can never loosen the policy.
func Load(filename string) (*Policy, error) {
	data, err := os.ReadFile(filename)
	if errors.Is(err, os.ErrNotExist) {
		return builtin, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return Parse(string(data), filename)
}

// Parse reads a policy from TOML text; origin names it in messages. Unless
// the text sets `defaults = false`, the built-in rules follow its own and
// the built-in grants add to its own.
func Parse(text, origin string) (*Policy, error) {
	return parse(text, origin, true)
}

func parse(text, origin string, withDefaults bool) (*Policy, error) {
	var doc fileDoc
	md, err := toml.Decode(text, &doc)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", origin, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		line := keyLine(text, k)
		return nil, fmt.Errorf("policy %s: line %d: unknown key %q (known: defaults, sandbox, [sandbox], [grants], [[rule]] with name, principal, effect, target, head, sub, flags, confined, verdict)", origin, line, k.String())
	}
	p := &Policy{Origin: origin, sandbox: DefaultSandbox()}
	if doc.Sandbox.set {
		p.sandbox = doc.Sandbox.sb
	}
	for i := range doc.Rules {
		r, err := compileRule(&doc.Rules[i], i, origin)
		if err != nil {
			var re *ruleError
			key := ""
			if errors.As(err, &re) {
				key = re.key
			}
			return nil, fmt.Errorf("policy %s: line %d: rule %d: %w", origin, ruleLine(text, i, key), i+1, err)
		}
		p.rules = append(p.rules, r)
	}
	pats := make([]string, 0, len(doc.Grants))
	for pat := range doc.Grants {
		pats = append(pats, pat)
	}
	slices.Sort(pats)
	for _, pat := range pats {
		names := doc.Grants[pat]
		for _, n := range names {
			if !slices.Contains(knownGrants, n) {
				return nil, fmt.Errorf("policy %s: line %d: grants %q: unknown grant %q (known: %s)", origin, grantLine(text, pat), pat, n, strings.Join(knownGrants, ", "))
			}
		}
		if pat == "" {
			return nil, fmt.Errorf("policy %s: line %d: grants: empty principal pattern", origin, grantLine(text, pat))
		}
		p.grants = append(p.grants, grant{pattern: pat, names: slices.Clone(names)})
	}
	if withDefaults && (doc.Defaults == nil || *doc.Defaults) {
		p.rules = append(p.rules, builtin.rules...)
		p.grants = append(p.grants, builtin.grants...)
	}
	return p, nil
}

// ruleError is a semantic error in one rule, naming the key at fault so
// the message can point at its line.
type ruleError struct {
	key string
	msg string
}

func (e *ruleError) Error() string { return e.msg }

func ruleErr(key, format string, args ...any) error {
	return &ruleError{key: key, msg: key + ": " + fmt.Sprintf(format, args...)}
}

func compileRule(d *ruleDoc, i int, origin string) (*rule, error) {
	r := &rule{}
	n := i + 1
	if origin == "built-in default" {
		r.label = fmt.Sprintf("default rule %d", n)
	} else {
		r.label = fmt.Sprintf("%s rule %d", path.Base(origin), n)
	}
	if d.Name != "" {
		r.label += ": " + d.Name
	}
	var err error
	if r.principals, err = patternList("principal", d.Principal); err != nil {
		return nil, err
	}
	if r.effects, err = patternList("effect", d.Effect); err != nil {
		return nil, err
	}
	if d.Effect == nil {
		return nil, ruleErr("effect", "missing: name an effect kind (%s) or \"*\"", strings.Join(Kinds, ", "))
	}
	for _, e := range r.effects {
		if e != "*" && !KnownKind(e) {
			return nil, ruleErr("effect", "unknown effect %q (known: %s, or \"*\")", e, strings.Join(Kinds, ", "))
		}
	}
	if slices.Contains(r.effects, "*") {
		r.effects = nil
	}
	if r.targets, err = patternList("target", d.Target); err != nil {
		return nil, err
	}
	fsOnly := len(r.effects) > 0
	for _, e := range r.effects {
		if !strings.HasPrefix(e, "fs.") {
			fsOnly = false
		}
	}
	for _, t := range r.targets {
		if fsOnly && !isPathPattern(t) && t != "*" && t != "**" {
			return nil, ruleErr("target", "%q is not a path pattern: start it with /, ~ (home) or . (the session's working directory)", t)
		}
	}
	if slices.Contains(r.targets, "*") || slices.Contains(r.targets, "**") {
		r.targets = nil
	}
	if r.heads, err = patternList("head", d.Head); err != nil {
		return nil, err
	}
	if r.subs, err = patternList("sub", d.Sub); err != nil {
		return nil, err
	}
	for _, f := range d.Flags {
		name, neg := strings.CutPrefix(f, "!")
		if !slices.Contains(flagNames, name) {
			return nil, ruleErr("flags", "unknown flag %q (known: %s, each may be negated with !)", f, strings.Join(flagNames, ", "))
		}
		r.flags = append(r.flags, flagCond{name: name, want: !neg})
		if name == "dynamic" && !neg {
			r.wantsDynamic = true
		}
	}
	r.confined = d.Confined
	switch d.Verdict {
	case Allow, Ask, Deny:
		r.verdict = d.Verdict
	case "":
		return nil, ruleErr("verdict", "missing: say allow, ask or deny")
	default:
		return nil, ruleErr("verdict", "unknown verdict %q (known: allow, ask, deny)", d.Verdict)
	}
	return r, nil
}

// patternList accepts a string or an array of strings. A missing key is
// the empty list, meaning "any".
func patternList(key string, v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if v == "" {
			return nil, ruleErr(key, "empty pattern; use \"*\" for any")
		}
		return []string{v}, nil
	case []any:
		if len(v) == 0 {
			return nil, ruleErr(key, "empty list; leave the key out for any")
		}
		out := make([]string, 0, len(v))
		for _, x := range v {
			s, ok := x.(string)
			if !ok || s == "" {
				return nil, ruleErr(key, "every item must be a non-empty string, found %v", x)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, ruleErr(key, "must be a string or a list of strings, found %T", v)
}

// Grants returns the grants every matching pattern gives principal,
// sorted and without duplicates.
func (p *Policy) Grants(principal string) []string {
	var out []string
	for _, g := range p.grants {
		if matchName(g.pattern, principal) {
			for _, n := range g.names {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// Decide gives the verdict for principal doing effects. Each effect gets
// the verdict of the first rule it matches, or ask when none does; the
// decision is the strictest of them (allow when there are no effects).
// Two guards hold whatever the rules say: an effect of an unknown kind is
// never allowed, and a dynamic effect is allowed only by a rule that
// names the dynamic flag.
func (p *Policy) Decide(principal string, effects []Effect, ctx DecideContext) Decision {
	d := Decision{Verdict: Allow, Reasons: make([]Reason, 0, len(effects))}
	seen := make(map[Reason]bool, len(effects))
	anch := &anchors{ctx: ctx}
	for i := range effects {
		e := &effects[i]
		verdict, label := Ask, "no rule matches: ask"
		for _, r := range p.rules {
			if r.matches(principal, e, anch) {
				verdict, label = r.verdict, r.label
				break
			}
		}
		if verdict == Allow && !KnownKind(e.Kind) {
			verdict, label = Ask, "unknown effect kind: ask"
		}
		reason := Reason{Effect: e.Kind, Target: e.Target, Head: e.Head, Rule: label, Verdict: verdict}
		if !seen[reason] {
			seen[reason] = true
			d.Reasons = append(d.Reasons, reason)
		}
		d.Verdict = Stricter(d.Verdict, verdict)
	}
	return d
}

func (r *rule) matches(principal string, e *Effect, anch *anchors) bool {
	if r.verdict == Allow {
		if e.Dynamic && !r.wantsDynamic {
			return false
		}
		if !KnownKind(e.Kind) {
			return false
		}
	}
	if r.confined != nil && *r.confined != anch.ctx.Confined {
		return false
	}
	if len(r.principals) > 0 && !anyName(r.principals, principal) {
		return false
	}
	if len(r.effects) > 0 && !slices.Contains(r.effects, e.Kind) {
		return false
	}
	if len(r.heads) > 0 && !anyName(r.heads, e.Head) {
		return false
	}
	if len(r.subs) > 0 && !anyName(r.subs, e.Sub) {
		return false
	}
	for _, f := range r.flags {
		if e.flag(f.name) != f.want {
			return false
		}
	}
	if len(r.targets) == 0 {
		return true
	}
	// A dynamic effect's target is source text, not a place: a target
	// pattern can neither allow nor deny it.
	if e.Dynamic || e.Target == "" {
		return false
	}
	if !strings.HasPrefix(e.Kind, "fs.") {
		return anyName(r.targets, e.Target)
	}
	t := path.Clean(e.Target)
	if e.Glob {
		t = StaticPrefix(t)
	}
	for _, pat := range r.targets {
		if isPathPattern(pat) && anch.matchTarget(pat, t) {
			return true
		}
	}
	return false
}

func anyName(pats []string, s string) bool {
	for _, p := range pats {
		if matchName(p, s) {
			return true
		}
	}
	return false
}

// keyLine finds the line of an undecoded key, best effort: the line where
// its last component is assigned inside its table, else 0.
func keyLine(text string, k toml.Key) int {
	if len(k) == 0 {
		return 0
	}
	if len(k) >= 2 && k[0] == "rule" {
		// Keys inside [[rule]] tables: search every rule table.
		for i := 0; ; i++ {
			start, end := tableSpan(text, "[[rule]]", i)
			if start == 0 {
				break
			}
			if l := assignLine(text, start, end, k[len(k)-1]); l > 0 {
				return l
			}
		}
		return 0
	}
	if len(k) >= 2 {
		start, end := tableSpan(text, "["+k[0]+"]", 0)
		if start > 0 {
			if l := assignLine(text, start, end, k[len(k)-1]); l > 0 {
				return l
			}
			return start
		}
	}
	return assignLine(text, 1, firstHeader(text), k[len(k)-1])
}

// ruleLine is the line of key in the i-th [[rule]] table (its header when
// the key is absent).
func ruleLine(text string, i int, key string) int {
	start, end := tableSpan(text, "[[rule]]", i)
	if start == 0 {
		return 0
	}
	if l := assignLine(text, start, end, key); l > 0 {
		return l
	}
	return start
}

func grantLine(text, pat string) int {
	start, end := tableSpan(text, "[grants]", 0)
	if start == 0 {
		return 0
	}
	for _, q := range []string{`"` + pat + `"`, `'` + pat + `'`, pat} {
		if l := assignLine(text, start, end, q); l > 0 {
			return l
		}
	}
	return start
}

// tableSpan returns the 1-based line of the n-th header equal to header
// (spaces ignored) and the line of the next header (or past the end).
func tableSpan(text, header string, n int) (start, end int) {
	lines := strings.Split(text, "\n")
	want := strings.ReplaceAll(header, " ", "")
	count := 0
	for i, l := range lines {
		h, ok := headerOf(l)
		if !ok {
			continue
		}
		if start > 0 {
			return start, i + 1
		}
		if h == want {
			if count == n {
				start = i + 1
			}
			count++
		}
	}
	if start > 0 {
		return start, len(lines) + 1
	}
	return 0, 0
}

func firstHeader(text string) int {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if _, ok := headerOf(l); ok {
			return i + 1
		}
	}
	return len(lines) + 1
}

func headerOf(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "[") {
		return "", false
	}
	if i := strings.IndexByte(t, '#'); i > 0 {
		t = strings.TrimSpace(t[:i])
	}
	if !strings.HasSuffix(t, "]") {
		return "", false
	}
	return strings.ReplaceAll(t, " ", ""), true
}

// assignLine finds `key =` between lines [start, end) (1-based).
func assignLine(text string, start, end int, key string) int {
	lines := strings.Split(text, "\n")
	for i := start - 1; i < end-1 && i < len(lines); i++ {
		if i < 0 {
			continue
		}
		t := strings.TrimSpace(lines[i])
		rest, ok := strings.CutPrefix(t, key)
		if !ok {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(rest), "=") {
			return i + 1
		}
	}
	return 0
}
