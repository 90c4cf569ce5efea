// Package rpc is Shoal's JSON-RPC 2.0 layer: one JSON object per line over
// a stream (the kernel's unix socket), the kernel error-code table, and a
// symmetric connection that serves requests and makes calls.
package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// DefaultMaxFrame bounds one frame (one line). Raw reads are capped by the
// kernel's raw ceiling (64 MiB by default), which base64 grows by a third.
const DefaultMaxFrame = 96 << 20

// ErrFrameTooLarge is returned by [FrameReader.Next] for a line longer than
// the limit; the reader has skipped the rest of that line and can go on.
var ErrFrameTooLarge = errors.New("frame too large")

// FrameReader splits a stream into newline-terminated frames.
type FrameReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewFrameReader reads frames of at most max bytes (DefaultMaxFrame if
// max <= 0).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &FrameReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// SetMax changes the bound from the next frame on (DefaultMaxFrame if
// max <= 0).
func (f *FrameReader) SetMax(max int) {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	f.max = max
}

// keepBuf is the largest frame buffer kept between frames: one big frame
// does not pin its memory for the rest of the connection.
const keepBuf = 1 << 20

// Next returns the next non-empty frame without its line ending. The
// returned slice is valid until the next call. At the end of the stream it
// returns io.EOF (a final unterminated line is still returned first).
func (f *FrameReader) Next() ([]byte, error) {
	for {
		if cap(f.buf) > keepBuf {
			f.buf = nil
		}
		f.buf = f.buf[:0]
		tooLarge := false
		for {
			chunk, err := f.br.ReadSlice('\n')
			if !tooLarge {
				if len(f.buf)+len(chunk) > f.max+2 { // allow \r\n beyond the limit
					tooLarge = true
					f.buf = f.buf[:0]
				} else {
					f.buf = append(f.buf, chunk...)
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			if tooLarge {
				if err == io.EOF {
					return nil, io.EOF
				}
				return nil, ErrFrameTooLarge
			}
			line := bytes.TrimRight(f.buf, "\r\n")
			if len(bytes.TrimSpace(line)) == 0 {
				if err == io.EOF {
					return nil, io.EOF
				}
				break // skip blank lines
			}
			return line, nil
		}
	}
}

// Message is one JSON-RPC 2.0 object: a request (ID and Method), a
// notification (Method, no ID) or a response (ID and Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest reports whether m expects a response.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m answers a call.
func (m *Message) IsResponse() bool { return m.Method == "" && m.ID != nil }

// Decode parses and validates one frame. The error is ParseError for
// invalid JSON and InvalidRequest for JSON that is not a JSON-RPC 2.0
// object; when the frame carried a usable id, it is returned with the error
// so the answer can name it.
//
// An id that is not valid UTF-8 is refused (with no id): echoed, it
// would make the answer invalid JSON.
func Decode(frame []byte) (*Message, json.RawMessage, *Error) {
	m, id, err := decode(frame)
	if id != nil && !utf8.Valid(id) {
		return nil, nil, Errorf(InvalidRequest, "id is not valid UTF-8: use a number or a UTF-8 string")
	}
	return m, id, err
}

func decode(frame []byte) (*Message, json.RawMessage, *Error) {
	frame = bytes.TrimSpace(frame)
	if json.Valid(frame) {
		// The members alias the frame, which the reader reuses: copy it.
		if m, ok := decodeFast(bytes.Clone(frame)); ok {
			return m, m.ID, nil
		}
	}
	return decodeSlow(frame)
}

// decodeSlow is Decode through encoding/json, with precise errors.
func decodeSlow(frame []byte) (*Message, json.RawMessage, *Error) {
	if len(frame) == 0 || frame[0] != '{' {
		if len(frame) > 0 && frame[0] == '[' {
			return nil, nil, Errorf(InvalidRequest, "batch requests are not supported: send one JSON object per line")
		}
		if !json.Valid(frame) {
			return nil, nil, Errorf(ParseError, "frame is not valid JSON: send one JSON-RPC 2.0 object per line")
		}
		return nil, nil, Errorf(InvalidRequest, "frame is not a JSON object: send one JSON-RPC 2.0 object per line")
	}
	var raw struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(frame, &raw); err != nil {
		if !json.Valid(frame) {
			return nil, nil, Errorf(ParseError, "frame is not valid JSON: %v", err)
		}
		return nil, nil, Errorf(InvalidRequest, "malformed JSON-RPC object: %v", err)
	}
	id := raw.ID
	if id != nil {
		switch {
		case bytes.Equal(id, []byte("null")):
		case id[0] == '"':
		case id[0] == '-' || id[0] >= '0' && id[0] <= '9':
		default:
			return nil, nil, Errorf(InvalidRequest, "id must be a string, a number or null")
		}
	}
	if raw.JSONRPC == nil || *raw.JSONRPC != "2.0" {
		return nil, id, Errorf(InvalidRequest, `"jsonrpc" must be "2.0"`)
	}
	m := &Message{JSONRPC: "2.0", ID: id, Params: raw.Params, Result: raw.Result}
	if raw.Method != nil {
		if *raw.Method == "" {
			return nil, id, Errorf(InvalidRequest, `"method" must be a non-empty string`)
		}
		m.Method = *raw.Method
		if p := bytes.TrimSpace(raw.Params); len(p) > 0 && p[0] != '{' && p[0] != '[' && !bytes.Equal(p, []byte("null")) {
			return nil, id, Errorf(InvalidRequest, `"params" must be an object or an array`)
		}
		return m, id, nil
	}
	if id == nil {
		return nil, nil, Errorf(InvalidRequest, `a request needs "method"; a response needs "id"`)
	}
	if raw.Error != nil && !bytes.Equal(raw.Error, []byte("null")) {
		var e Error
		if err := json.Unmarshal(raw.Error, &e); err != nil {
			return nil, id, Errorf(InvalidRequest, "malformed error object: %v", err)
		}
		m.Error = &e
	} else if raw.Result == nil {
		return nil, id, Errorf(InvalidRequest, `a request needs "method"; a response needs "result" or "error"`)
	}
	return m, id, nil
}

// wireError is Error as sent: data always carries the code's name.
func wireError(e *Error) *Error {
	data := map[string]any{"name": e.Code.Name()}
	switch d := e.Data.(type) {
	case nil:
	case map[string]any:
		for k, v := range d {
			data[k] = v
		}
	default:
		data["detail"] = d
	}
	return &Error{Code: e.Code, Message: e.Message, Data: data}
}

// Encode marshals m as one frame, newline included. Params and Result are
// copied as they are (they come from json.Marshal or a decoded frame, so
// they are compact, valid JSON): encoding does not parse them again.
func Encode(m *Message) ([]byte, error) {
	b := make([]byte, 0, 48+len(m.Method)+len(m.Params)+len(m.Result))
	b = append(b, `{"jsonrpc":"2.0"`...)
	if m.ID != nil {
		b = append(b, `,"id":`...)
		b = append(b, m.ID...)
	}
	if m.Method != "" {
		name, err := json.Marshal(m.Method)
		if err != nil {
			return nil, fmt.Errorf("encode frame: %w", err)
		}
		b = append(b, `,"method":`...)
		b = append(b, name...)
	}
	if len(m.Params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, m.Params...)
	}
	if m.Error != nil {
		e, err := json.Marshal(wireError(m.Error))
		if err != nil {
			return nil, fmt.Errorf("encode frame: %w", err)
		}
		b = append(b, `,"error":`...)
		b = append(b, e...)
	} else if m.Result != nil {
		b = append(b, `,"result":`...)
		b = append(b, m.Result...)
	}
	return append(b, '}', '\n'), nil
}
