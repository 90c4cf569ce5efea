package rpc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// decodeFast splits a JSON-RPC object, already checked to be valid JSON,
// into its members in one pass and without reflection. It reports false
// for anything unusual (escapes in keys, duplicate or unknown members, odd
// shapes) and Decode then takes the careful encoding/json path, so the
// messages and errors a peer sees never depend on this shortcut.
func decodeFast(frame []byte) (*Message, bool) {
	i := skipWS(frame, 0)
	if i >= len(frame) || frame[i] != '{' {
		return nil, false
	}
	i++
	m := &Message{}
	var haveVersion, haveError bool
	var errRaw []byte
	for n := 0; ; n++ {
		i = skipWS(frame, i)
		if i >= len(frame) {
			return nil, false
		}
		if frame[i] == '}' && n == 0 {
			i++
			break
		}
		if frame[i] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(frame[i+1:], '"')
		if end < 0 {
			return nil, false
		}
		key := frame[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, false
		}
		i = skipWS(frame, i+end+2)
		if i >= len(frame) || frame[i] != ':' {
			return nil, false
		}
		i = skipWS(frame, i+1)
		start := i
		j, ok := skipValue(frame, i, 0)
		if !ok {
			return nil, false
		}
		val := frame[start:j]
		switch string(key) {
		case "jsonrpc":
			if haveVersion || string(val) != `"2.0"` {
				return nil, false
			}
			haveVersion = true
		case "id":
			if m.ID != nil || !(val[0] == '"' || val[0] == '-' || val[0] >= '0' && val[0] <= '9' || string(val) == "null") {
				return nil, false
			}
			m.ID = json.RawMessage(val)
		case "method":
			if m.Method != "" || val[0] != '"' || bytes.IndexByte(val, '\\') >= 0 || len(val) < 3 || !utf8.Valid(val) {
				return nil, false
			}
			m.Method = string(val[1 : len(val)-1])
		case "params":
			if m.Params != nil || !(val[0] == '{' || val[0] == '[' || string(val) == "null") {
				return nil, false
			}
			m.Params = json.RawMessage(val)
		case "result":
			if m.Result != nil {
				return nil, false
			}
			m.Result = json.RawMessage(val)
		case "error":
			if haveError {
				return nil, false
			}
			haveError, errRaw = true, val
		default:
			return nil, false
		}
		i = skipWS(frame, j)
		if i >= len(frame) {
			return nil, false
		}
		if frame[i] == ',' {
			i++
			continue
		}
		if frame[i] != '}' {
			return nil, false
		}
		i++
		break
	}
	if skipWS(frame, i) != len(frame) || !haveVersion {
		return nil, false
	}
	m.JSONRPC = "2.0"
	switch {
	case m.Method != "":
		if haveError || m.Result != nil {
			return nil, false
		}
	case m.ID != nil && haveError && m.Result == nil:
		if string(errRaw) == "null" {
			return nil, false
		}
		var e Error
		if json.Unmarshal(errRaw, &e) != nil {
			return nil, false
		}
		m.Error = &e
	case m.ID != nil && m.Result != nil && !haveError:
	default:
		return nil, false
	}
	return m, true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at i. It checks
// structure (brackets, strings) but not number or literal spelling.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > 10000 {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, true
			}
		}
		return 0, false
	case '{', '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		j := skipWS(b, i+1)
		if j < len(b) && b[j] == closing {
			return j + 1, true
		}
		for {
			if c == '{' {
				if j >= len(b) || b[j] != '"' {
					return 0, false
				}
				k, ok := skipValue(b, j, depth+1)
				if !ok {
					return 0, false
				}
				j = skipWS(b, k)
				if j >= len(b) || b[j] != ':' {
					return 0, false
				}
				j = skipWS(b, j+1)
			}
			k, ok := skipValue(b, j, depth+1)
			if !ok {
				return 0, false
			}
			j = skipWS(b, k)
			if j >= len(b) {
				return 0, false
			}
			if b[j] == closing {
				return j + 1, true
			}
			if b[j] != ',' {
				return 0, false
			}
			j = skipWS(b, j+1)
		}
	default:
		j := i
		for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] >= '0' && b[j] <= '9' || b[j] >= 'a' && b[j] <= 'z' || b[j] == 'E') {
			j++
		}
		if j == i {
			return 0, false
		}
		return j, true
	}
}
