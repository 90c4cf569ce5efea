package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Tool results are read by models through structuredContent: hosts such
// as Claude Code hand the model JSON.stringify(structuredContent), not the
// text. So structuredContent is plain, compact JSON carrying what the
// text carries — status, refs, the rendered preview, what was cut and the
// exact next call — and never more bytes than the text or the budget.

// resultBudgetEnv overrides defaultResultBudget (bytes).
const resultBudgetEnv = "SHOAL_MCP_RESULT_BUDGET"

// defaultResultBudget bounds JSON.stringify(structuredContent) of one
// tool result.
const defaultResultBudget = 8 << 10

// resultBudget is the configured budget.
func resultBudget() int {
	if s := os.Getenv(resultBudgetEnv); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 512 {
			return n
		}
	}
	return defaultResultBudget
}

// obj is a JSON object whose members keep the order they were set in, so
// a model reads status before preview.
type obj struct {
	keys []string
	vals map[string]any
}

func newObj() *obj { return &obj{vals: map[string]any{}} }

// set adds or replaces a member.
func (o *obj) set(k string, v any) *obj {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	return o
}

func (o *obj) get(k string) any { return o.vals[k] }

// MarshalJSON writes the members in order, without HTML escaping (what
// JSON.stringify would produce, byte for byte, for these values).
func (o *obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := compactJSON(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := compactJSON(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// compactJSON encodes v compactly without HTML escaping.
func compactJSON(v any) ([]byte, error) { return rpc.Marshal(v) }

// size is len(JSON.stringify(o)).
func size(o *obj) int {
	b, err := compactJSON(o)
	if err != nil {
		return 0
	}
	return len(b)
}

// shrinkable are the members fit may shorten, longest first.
var shrinkable = []string{"stdout", "stderr", "preview", "value"}

// fit cuts o's longest text members until JSON.stringify(o) is at most
// limit bytes, and says so in o's cut member. Status, refs and the next
// call are never cut.
func fit(o *obj, limit int) {
	base, _ := o.get("cut").([]string)
	orig := map[string]int{} // members cut so far: their original length
	var order []string
	for range 12 {
		over := size(o) - limit
		if over <= 0 {
			return
		}
		key, longest := "", 0
		for _, k := range shrinkable {
			if s, ok := o.get(k).(string); ok && len(s) > longest {
				key, longest = k, len(s)
			}
		}
		if key == "" || longest < 64 {
			// Only structure is left: replace the largest value by a note.
			key, longest = "", 0
			for _, k := range shrinkable {
				if v := o.get(k); v != nil {
					if _, isStr := v.(string); !isStr {
						if b, _ := compactJSON(v); len(b) > longest {
							key, longest = k, len(b)
						}
					}
				}
			}
			if key == "" {
				return
			}
			o.set(key, fmt.Sprintf("(%d bytes of JSON left out to fit the result budget; read it with shoal_get and a path/slice)", longest))
			o.set("cut", append(base, key+": left out to fit the result budget"))
			base = o.get("cut").([]string)
			continue
		}
		s := o.get(key).(string)
		if _, seen := orig[key]; !seen {
			orig[key] = len(strings.TrimSuffix(s, "…"))
			order = append(order, key)
		}
		// Escapes make the encoding longer than the string: cut in
		// proportion, and a little more for the note.
		enc, _ := compactJSON(s)
		drop := int(float64(over+80)*float64(len(s))/float64(max(len(enc), 1))) + 1
		keep := max(len(s)-drop, 0)
		for keep > 0 && !utf8.RuneStart(s[keep]) {
			keep--
		}
		o.set(key, s[:keep]+"…")
		notes := append([]string(nil), base...)
		for _, k := range order {
			notes = append(notes, fmt.Sprintf("%s: %d of %d bytes shown here to fit the result budget", k, len(o.get(k).(string))-len("…"), orig[k]))
		}
		o.set("cut", notes)
	}
}

// plainPreview turns a typed-JSON preview (decoded with UseNumber) into
// plain JSON for a model, collecting what its elision markers say was
// cut. at is the path of v from the value read.
func plainPreview(v any, at string, cuts *[]cut) any {
	m, ok := v.(*obj)
	if !ok {
		return v
	}
	tag, _ := m.get("$").(string)
	if e, ok := m.get("elided").(*obj); ok {
		*cuts = append(*cuts, cutOf(tag, at, e))
	}
	switch tag {
	case "null":
		return nil
	case "bool", "int", "float", "str":
		return m.get("v")
	case "bytes":
		return newObj().set("base64", m.get("b64"))
	case "list":
		items, _ := m.get("v").([]any)
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = plainPreview(it, at+"["+strconv.Itoa(i)+"]", cuts)
		}
		return out
	case "record":
		fields, _ := m.get("v").(*obj)
		out := newObj()
		if fields != nil {
			for _, k := range fields.keys {
				out.set(k, plainPreview(fields.vals[k], at+"."+k, cuts))
			}
		}
		return out
	case "table":
		rows, _ := m.get("rows").([]any)
		out := make([]any, len(rows))
		for i, r := range rows {
			cells, _ := r.([]any)
			pc := make([]any, len(cells))
			for j, c := range cells {
				pc[j] = plainPreview(c, at+"["+strconv.Itoa(i)+"]", cuts)
			}
			out[i] = pc
		}
		return newObj().set("cols", m.get("cols")).set("rows", out)
	}
	return v
}

// decodeInOrder decodes JSON with objects as *obj (members in order) and
// numbers as json.Number.
func decodeInOrder(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, fmt.Errorf("decode kernel answer: %w", err)
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return t, nil
	}
	switch d {
	case '{':
		o := newObj()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		_, err := dec.Token()
		return o, err
	case '[':
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// cut is one elision marker, read.
type cut struct {
	at    string // path of the cut part
	note  string // what was shown of what
	str   bool   // a string or bytes was cut
	path  string // next.path
	slice string // next.slice
}

func cutOf(tag, at string, e *obj) cut {
	c := cut{at: at}
	if at == "" {
		c.at = "."
	}
	if next, ok := e.get("next").(*obj); ok {
		c.path, _ = next.get("path").(string)
		c.slice, _ = next.get("slice").(string)
	}
	switch tag {
	case "str":
		c.note = fmt.Sprintf("%v characters shown of %v bytes", e.get("shown_chars"), e.get("total_bytes"))
		if tc := e.get("total_chars"); tc != nil {
			c.note = fmt.Sprintf("%v of %v characters shown", e.get("shown_chars"), tc)
		}
	case "record":
		c.note = fmt.Sprintf("%v of %v fields shown", e.get("fields_shown"), e.get("fields_total"))
	default:
		c.note = fmt.Sprintf("%v of %v shown", e.get("shown"), e.get("total"))
	}
	c.str = tag == "str" || tag == "bytes"
	return c
}

// getCall is the shoal_get call that reads target with the given
// arguments, as a model would write it.
func getCall(target string, args ...string) string {
	o := newObj().set("target", target)
	for i := 0; i+1 < len(args); i += 2 {
		if args[i+1] != "" {
			o.set(args[i], args[i+1])
		}
	}
	b, _ := compactJSON(o)
	return "shoal_get " + string(b)
}

// nextForCuts is the next call after a preview that was cut: for a cut
// string the tail and a search, otherwise the next page.
func nextForCuts(target string, cuts []cut) string {
	if len(cuts) == 0 {
		return ""
	}
	c := cuts[0]
	path := c.path
	if path == "." {
		path = ""
	}
	if c.str {
		return getCall(target, "path", path, "slice", "-2000..") + ` shows the end; add "grep":"RE" to search it instead (or run: out ` +
			strings.TrimPrefix(target, "out:") + ` | grep -n RE)`
	}
	return getCall(target, "path", path, "slice", c.slice) + " shows the next part"
}

// cutNotes renders cuts for the cut member.
func cutNotes(cuts []cut) []string {
	out := make([]string, 0, len(cuts))
	for i, c := range cuts {
		if i == 8 {
			out = append(out, fmt.Sprintf("and %d more", len(cuts)-i))
			break
		}
		out = append(out, c.at+": "+c.note)
	}
	return out
}
