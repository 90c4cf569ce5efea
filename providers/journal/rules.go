package journal

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/BurntSushi/toml"
	gitleaks "github.com/zricethezav/gitleaks/v8/config"
)

// The maintained half of redaction: gitleaks' default rules (its config
// package's gitleaks.toml, some 220 credential formats kept up by that
// project), applied as gitleaks' own detector applies them: a keyword
// prefilter (one Aho-Corasick pass over the lowercased text) picks the
// rules worth running, each rule's secret group is what is redacted, and
// a rule's entropy floor and allowlists (regexes, stop words) keep its
// false positives out. Compiling the rules costs tens of milliseconds,
// so it happens once, on first use.

// catalogRule is one gitleaks rule as redaction uses it.
type catalogRule struct {
	id       string
	re       *regexp.Regexp
	group    int
	entropy  float64
	keywords []string
	allow    []*gitleaks.Allowlist
}

// catalog is the compiled rule set.
type catalog struct {
	rules    []catalogRule
	always   []int // rules without keywords: run on every text
	byWord   map[string][]int
	trie     *ahocorasick.Trie
	globalAl []*gitleaks.Allowlist
}

// rulesOnce compiles the catalog on first use.
var rulesOnce = sync.OnceValues(loadCatalog)

// loadCatalog reads gitleaks' default configuration with the kernel's
// TOML reader (gitleaks reads it through viper, a global we do not want)
// and lets gitleaks translate and compile it.
func loadCatalog() (*catalog, error) {
	var vc gitleaks.ViperConfig
	if _, err := toml.Decode(gitleaks.DefaultConfig, &vc); err != nil {
		return nil, fmt.Errorf("gitleaks rules: %w", err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		return nil, fmt.Errorf("gitleaks rules: %w", err)
	}
	c := &catalog{byWord: map[string][]int{}, globalAl: cfg.Allowlists}
	for _, id := range cfg.OrderedRules {
		r := cfg.Rules[id]
		// Path-only rules name files, not secrets; composite rules need
		// their companions nearby, which a command line rarely has.
		if r.Regex == nil || len(r.RequiredRules) > 0 {
			continue
		}
		i := len(c.rules)
		c.rules = append(c.rules, catalogRule{id: r.RuleID, re: r.Regex, group: r.SecretGroup, entropy: r.Entropy,
			keywords: r.Keywords, allow: r.Allowlists})
		if len(r.Keywords) == 0 {
			c.always = append(c.always, i)
		}
		for _, k := range r.Keywords {
			c.byWord[k] = append(c.byWord[k], i)
		}
	}
	words := make([]string, 0, len(c.byWord))
	for k := range c.byWord {
		words = append(words, k)
	}
	slices.Sort(words)
	c.trie = ahocorasick.NewTrieBuilder().AddStrings(words).Build()
	return c, nil
}

// span is a byte range of text to redact.
type span struct{ start, end int }

// find returns the secrets the catalog finds in s, sorted and merged.
func (c *catalog) find(s string) []span {
	lower := strings.ToLower(s)
	run := map[int]bool{}
	for _, i := range c.always {
		run[i] = true
	}
	for _, m := range c.trie.MatchString(lower) {
		for _, i := range c.byWord[m.MatchString()] {
			run[i] = true
		}
	}
	if len(run) == 0 {
		return nil
	}
	var spans []span
	for i := range run {
		spans = c.rules[i].find(s, spans, c.globalAl)
	}
	return mergeSpans(spans)
}

// find appends the spans of r's secrets in s.
func (r *catalogRule) find(s string, spans []span, global []*gitleaks.Allowlist) []span {
	for _, m := range r.re.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[0], m[1]
		if r.group > 0 {
			if 2*r.group+1 >= len(m) || m[2*r.group] < 0 {
				continue
			}
			start, end = m[2*r.group], m[2*r.group+1]
		} else {
			// As gitleaks: the first non-empty group, else the match.
			for g := 1; 2*g+1 < len(m); g++ {
				if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
					start, end = m[2*g], m[2*g+1]
					break
				}
			}
		}
		secret := s[start:end]
		if secret == "" || strings.Contains(secret, Marker) || strings.HasPrefix(secret, "$") {
			continue
		}
		if r.entropy > 0 && shannon(secret) < r.entropy {
			continue
		}
		if allowed(secret, s[m[0]:m[1]], lineOf(s, m[0], m[1]), r.allow) || allowed(secret, s[m[0]:m[1]], lineOf(s, m[0], m[1]), global) {
			continue
		}
		spans = append(spans, span{start, end})
	}
	return spans
}

// allowed applies gitleaks allowlists: a regex (against the secret, the
// match or the line, as the list says) or a stop word in the secret. A
// list whose other conditions name commits or paths, which text has
// none of, allows nothing when all of its conditions must hold.
func allowed(secret, match, line string, lists []*gitleaks.Allowlist) bool {
	for _, a := range lists {
		if a.MatchCondition == gitleaks.AllowlistMatchAnd && (len(a.Commits) > 0 || len(a.Paths) > 0) {
			continue
		}
		target := secret
		switch a.RegexTarget {
		case "match":
			target = match
		case "line":
			target = line
		}
		if a.RegexAllowed(target) {
			return true
		}
		if ok, _ := a.ContainsStopWord(secret); ok {
			return true
		}
	}
	return false
}

// lineOf is the line of s holding [start, end).
func lineOf(s string, start, end int) string {
	from := strings.LastIndexByte(s[:start], '\n') + 1
	to := strings.IndexByte(s[end:], '\n')
	if to < 0 {
		return s[from:]
	}
	return s[from : end+to]
}

// shannon is the Shannon entropy of s in bits per character, as gitleaks
// computes it for its entropy floors.
func shannon(s string) float64 {
	counts := map[rune]int{}
	n := 0
	for _, r := range s {
		counts[r]++
		n++
	}
	e := 0.0
	for _, c := range counts {
		f := float64(c) / float64(n)
		e -= f * math.Log2(f)
	}
	return e
}

// mergeSpans sorts spans and joins the overlapping ones.
func mergeSpans(spans []span) []span {
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// replaceSpans puts Marker in place of each span.
func replaceSpans(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(Marker)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}
