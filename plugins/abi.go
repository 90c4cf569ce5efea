package plugins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/sdk/abi"
)

// ABI is the host–guest contract this package speaks (package sdk/abi
// writes it down for both sides; docs/plugins.md describes it). A module
// proves it speaks it by exporting a function of this name.
const ABI = abi.Version

// MaxAnswer caps one answer of a plugin. A larger answer fails the call
// rather than letting a plugin make the kernel copy unbounded memory.
const MaxAnswer = 8 << 20

// Export names of shoal_abi_v1.
const (
	exportMarker   = abi.Version
	exportAlloc    = abi.ExportAlloc
	exportFree     = abi.ExportFree
	exportDescribe = abi.ExportDescribe
	exportRead     = abi.ExportRead
	exportList     = abi.ExportList
	exportValidate = abi.ExportValidate
	exportInit     = abi.Initialize
	exportStart    = abi.Start
	wasiModule     = abi.WASIModule
)

type signature struct{ params, results []api.ValueType }

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64

	sigMarker  = signature{}
	sigAlloc   = signature{[]api.ValueType{i32}, []api.ValueType{i32}}
	sigFree    = signature{[]api.ValueType{i32}, nil}
	sigAnswer0 = signature{nil, []api.ValueType{i64}}
	sigAnswer2 = signature{[]api.ValueType{i32, i32}, []api.ValueType{i64}}
)

func (s signature) String() string {
	name := func(ts []api.ValueType) string {
		parts := make([]string, len(ts))
		for i, t := range ts {
			parts[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(parts, ",") + ")"
	}
	return name(s.params) + "->" + name(s.results)
}

func (s signature) matches(d api.FunctionDefinition) bool {
	return bytes.Equal(s.params, d.ParamTypes()) && bytes.Equal(s.results, d.ResultTypes())
}

// functionExports lists the names of a module's function exports by
// reading its export section, without compiling it: a module that is not
// a Shoal reactor is refused before paying for compilation. ok is false
// when the binary cannot be read this way; compiling it then reports the
// problem.
func functionExports(bin []byte) (names map[string]bool, ok bool) {
	return exportNames(bytes.NewReader(bin), int64(len(bin)))
}

// exportNames is functionExports on a module of size bytes read through
// r. It reads the section headers and the export section only: the
// export section precedes the code and data, so for a module of megabytes
// this reads a few kilobytes (the kernel checks it before it returns from
// Start, and reads the whole module in the background).
func exportNames(r io.ReaderAt, size int64) (names map[string]bool, ok bool) {
	var head [8]byte
	if size < 8 {
		return nil, false
	}
	if _, err := r.ReadAt(head[:], 0); err != nil || string(head[:4]) != "\x00asm" {
		return nil, false
	}
	for off := int64(8); off < size; {
		var hdr [6]byte // id, and a section size of at most 5 bytes
		n, _ := r.ReadAt(hdr[:], off)
		if n < 2 {
			return nil, false
		}
		secSize, l, ok := uleb32(hdr[1:n])
		if !ok {
			return nil, false
		}
		body := off + 1 + int64(l)
		end := body + int64(secSize)
		if end > size {
			return nil, false
		}
		if hdr[0] != 7 { // not the export section
			off = end
			continue
		}
		sec := make([]byte, secSize)
		if _, err := r.ReadAt(sec, body); err != nil {
			return nil, false
		}
		return parseExports(sec)
	}
	return map[string]bool{}, true
}

// uleb32 decodes an unsigned LEB128 number at the start of b and returns
// it with the number of bytes it took.
func uleb32(b []byte) (v uint32, n int, ok bool) {
	for shift := 0; shift < 35 && n < len(b); shift += 7 {
		c := b[n]
		n++
		v |= uint32(c&0x7f) << shift
		if c < 0x80 {
			return v, n, true
		}
	}
	return 0, 0, false
}

// parseExports reads the function names of an export section's body.
func parseExports(sec []byte) (names map[string]bool, ok bool) {
	i := 0
	next := func() (uint32, bool) {
		v, n, ok := uleb32(sec[i:])
		i += n
		return v, ok
	}
	count, ok := next()
	if !ok {
		return nil, false
	}
	names = map[string]bool{}
	for ; count > 0; count-- {
		l, ok := next()
		if !ok || uint64(i)+uint64(l)+1 > uint64(len(sec)) {
			return nil, false
		}
		name := string(sec[i : i+int(l)])
		i += int(l)
		kind := sec[i]
		i++
		if _, ok := next(); !ok {
			return nil, false
		}
		if kind == 0 {
			names[name] = true
		}
	}
	return names, true
}

// checkShape refuses, from its export names alone, a module that is not
// a Shoal plugin of this ABI, or not a reactor, or lacks an export its
// kind needs.
func checkShape(exports map[string]bool, kind string) error {
	if !exports[exportMarker] {
		var others []string
		for name := range exports {
			if strings.HasPrefix(name, "shoal_abi_") {
				others = append(others, name)
			}
		}
		slices.Sort(others)
		if len(others) > 0 {
			return fmt.Errorf("module speaks %s, this kernel speaks %s: rebuild it with the sdk of this kernel", strings.Join(others, ", "), ABI)
		}
		return fmt.Errorf("module does not export %s: it is not a Shoal plugin, or was built without importing github.com/shoal-sh/shoal/sdk", ABI)
	}
	if exports[exportStart] && !exports[exportInit] {
		return fmt.Errorf("module is a WASI command (it exports _start, not _initialize): build it as a reactor with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared")
	}
	needed := []string{exportAlloc, exportFree, exportDescribe, exportRead}
	if kind == KindValidator {
		needed[3] = exportValidate
	}
	for _, name := range needed {
		if !exports[name] {
			return fmt.Errorf("module lacks the %s export that a %s needs", name, kind)
		}
	}
	return nil
}

// checkModule inspects a compiled module before anything of it runs: the
// shape (as checkShape), the signatures of the exports, the imports (only
// WASI preview 1 is provided) and the memory.
func checkModule(cm wazero.CompiledModule, kind string) error {
	exports := cm.ExportedFunctions()
	names := make(map[string]bool, len(exports))
	for name := range exports {
		names[name] = true
	}
	if err := checkShape(names, kind); err != nil {
		return err
	}
	need := []struct {
		name string
		sig  signature
	}{
		{exportMarker, sigMarker},
		{exportAlloc, sigAlloc},
		{exportFree, sigFree},
		{exportDescribe, sigAnswer0},
	}
	if kind == KindProvider {
		need = append(need, struct {
			name string
			sig  signature
		}{exportRead, sigAnswer2})
	} else {
		need = append(need, struct {
			name string
			sig  signature
		}{exportValidate, sigAnswer2})
	}
	for _, n := range need {
		d, ok := exports[n.name]
		if !ok {
			return fmt.Errorf("module lacks the %s export that a %s needs", n.name, kind)
		}
		if !n.sig.matches(d) {
			return fmt.Errorf("export %s has signature %s, want %s", n.name, signature{d.ParamTypes(), d.ResultTypes()}, n.sig)
		}
	}
	if d, ok := exports[exportList]; ok && !sigAnswer2.matches(d) {
		return fmt.Errorf("export %s has signature %s, want %s", exportList, signature{d.ParamTypes(), d.ResultTypes()}, sigAnswer2)
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		return fmt.Errorf("module exports no memory named \"memory\"")
	}
	for _, d := range cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		if mod != wasiModule {
			return fmt.Errorf("module imports %s.%s; plugins may import only %s", mod, name, wasiModule)
		}
	}
	return nil
}

// description is what shoal_describe answers.
type description struct {
	ABI       string          `json:"abi"`
	Kind      string          `json:"kind"`
	Family    string          `json:"family"`
	Templates []descTemplate  `json:"templates"`
	Roots     []descResource  `json:"roots"`
	List      bool            `json:"list"`
	Channels  []string        `json:"channels"`
	Schema    json.RawMessage `json:"schema"`
}

type descTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description"`
	MimeType    string `json:"mimeType"`
}

type descResource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description"`
	MimeType    string `json:"mimeType"`
}

// envelope is every answer of the guest: ok with a typed value, a plain
// record or nothing, or an error with a code.
type envelope struct {
	OK     bool            `json:"ok"`
	Value  json.RawMessage `json:"value"`
	Record json.RawMessage `json:"record"`
	Error  *guestError     `json:"error"`
}

type guestError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Guest error codes with a meaning to the host.
const (
	guestNotFound      = abi.NotFound
	guestBadURI        = abi.BadURI
	guestInvalidParams = abi.InvalidParams
	guestRejected      = abi.Rejected
	guestPanic         = abi.Panic
)

var okAnswer = []byte(abi.OKAnswer)

// Answers as the sdk writes them: decodeEnvelope takes these apart
// without a JSON pass over the whole answer (value.Unmarshal or the
// record's validation reads the member itself anyway).
var (
	valuePrefix  = []byte(abi.ValuePrefix)
	recordPrefix = []byte(abi.RecordPrefix)
)

// decodeEnvelope parses an answer. A malformed one is a plugin failure.
func decodeEnvelope(answer []byte) (*envelope, error) {
	if bytes.HasSuffix(answer, []byte("}")) {
		if rest, ok := bytes.CutPrefix(answer, valuePrefix); ok {
			return &envelope{OK: true, Value: rest[:len(rest)-1]}, nil
		}
		if rest, ok := bytes.CutPrefix(answer, recordPrefix); ok && json.Valid(rest[:len(rest)-1]) {
			return &envelope{OK: true, Record: rest[:len(rest)-1]}, nil
		}
	}
	var env envelope
	if err := json.Unmarshal(answer, &env); err != nil {
		return nil, fmt.Errorf("malformed answer (not a JSON envelope): %v", err)
	}
	if env.OK == (env.Error != nil) {
		return nil, fmt.Errorf("malformed answer: an envelope has ok:true or an error, not both or neither")
	}
	if env.Error != nil && env.Error.Code == "" {
		return nil, fmt.Errorf("malformed answer: the error has no code")
	}
	return &env, nil
}

// pluginError builds the PLUGIN_ERROR every plugin failure becomes.
func pluginError(name string, format string, args ...any) *rpc.Error {
	return &rpc.Error{
		Code:    rpc.PluginError,
		Message: fmt.Sprintf("plugin %s: ", name) + fmt.Sprintf(format, args...),
		Data:    map[string]any{"plugin": name},
	}
}
