package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The stateless revision (2026-07-28) over streamable HTTP. Such a client
// has no handshake and no protocol session: every POST says its protocol
// version twice (the Mcp-Protocol-Version header and the body's _meta),
// names its method (and tool or resource) in the Mcp-Method and Mcp-Name
// headers, and is answered on its own response — a JSON object, or an
// event stream when notifications come before the answer (the
// subscriptions/listen stream is one that stays open). There is no
// Mcp-Session-Id, no GET stream and no DELETE. The bearer token is
// checked before any of this, as for the older revisions.

// modernPost reports whether a POST speaks 2026-07-28 or later: its
// header or its body's _meta says so. The two must then agree, which
// servePostModern checks.
func modernPost(h http.Header, body []byte) (header, meta string, modern bool) {
	header = h.Get(headerProtocol)
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) == nil {
		meta = metaVersion(m.Params)
	}
	return header, meta, mcp.IsModernProtocol(header) || mcp.IsModernProtocol(meta)
}

// modernStatus is the HTTP status 2026-07-28 gives a JSON-RPC error
// answered as JSON: an unknown method is 404, a malformed or mismatched
// request 400; other errors travel in a 200.
func modernStatus(code int) int {
	switch code {
	case mcp.METHOD_NOT_FOUND:
		return http.StatusNotFound
	case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		mcp.INVALID_REQUEST, mcp.INVALID_PARAMS, mcp.PARSE_ERROR:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// answerStatus is modernStatus of an encoded answer (200 for a result).
func answerStatus(resp []byte) int {
	var m struct {
		Error *rpcError `json:"error"`
	}
	if json.Unmarshal(resp, &m) != nil || m.Error == nil {
		return http.StatusOK
	}
	return modernStatus(m.Error.Code)
}

func writeModernError(w http.ResponseWriter, id json.RawMessage, code int, msg string, data any) {
	writeJSON(w, modernStatus(code), errorResponse(id, code, msg, data))
}

// postModern serves one stateless POST on a session of its own, which
// ends with the request (and with it any subscriptions/listen stream).
func (t *httpTransport) postModern(w http.ResponseWriter, r *http.Request, body []byte, header, meta string) {
	if strings.HasPrefix(strings.TrimSpace(string(body)), "[") {
		writeModernError(w, nil, mcp.INVALID_REQUEST, "protocol "+mcp.ProtocolVersion20260728+" has no batches: send one message per POST", nil)
		return
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		writeModernError(w, nil, mcp.PARSE_ERROR, "parse error: "+err.Error(), nil)
		return
	}
	switch {
	case r.Header.Get(mcp.HeaderLastEventID) != "":
		writeModernError(w, m.ID, mcp.HEADER_MISMATCH, "Last-Event-ID has no meaning in protocol "+mcp.ProtocolVersion20260728+": streams do not resume; send the request again with a new id", nil)
		return
	case header == "":
		writeModernError(w, m.ID, mcp.HEADER_MISMATCH, "the "+headerProtocol+" header is required with _meta "+mcp.MetaKeyProtocolVersion+" "+meta, nil)
		return
	case meta == "":
		writeModernError(w, m.ID, mcp.INVALID_PARAMS, "a "+header+" request must carry params._meta[\""+mcp.MetaKeyProtocolVersion+"\"]", nil)
		return
	case header != meta:
		writeModernError(w, m.ID, mcp.HEADER_MISMATCH, fmt.Sprintf("the %s header says %s but _meta says %s", headerProtocol, header, meta), nil)
		return
	case !mcp.IsValidProtocolVersion(meta):
		e := mcp.UnsupportedProtocolVersionError{Version: meta, Supported: mcp.ValidProtocolVersions}.JSONRPCError()
		writeModernError(w, m.ID, e.Error.Code, e.Error.Message, e.Error.Data)
		return
	case m.Method == "":
		writeModernError(w, m.ID, mcp.INVALID_REQUEST, "protocol "+mcp.ProtocolVersion20260728+" has no server-to-client requests, so no responses to post: answer input requests in the retried call's inputResponses", nil)
		return
	}
	if err := mcp.ValidateStandardHeaders(r.Header.Get, meta, mcp.MCPMethod(m.Method), m.Params); err != nil {
		writeModernError(w, m.ID, mcp.HEADER_MISMATCH, err.Error(), nil)
		return
	}

	s := t.f.newSession()
	defer s.close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if err := t.stateless.admit(ctx); err != nil {
		http.Error(w, "Service Unavailable: the request was cancelled while waiting", http.StatusServiceUnavailable)
		return
	}
	defer t.stateless.done()
	answer := make(chan []byte, 1)
	go func() { answer <- t.f.handle(ctx, s, body) }()
	streamAnswer(w, s, answer, cancel)
}

// streamAnswer writes the answer of one stateless request: as JSON when
// nothing came before it, else as an event stream carrying the session's
// notifications (log messages, progress, subscription updates) and then
// the answer. It returns once the answer is written or dropped; cancel
// ends the request when the client has gone.
func streamAnswer(w http.ResponseWriter, s *session, answer <-chan []byte, cancel context.CancelFunc) {
	rc := http.NewResponseController(w)
	streaming, broken := false, false
	event := func(b []byte) {
		if broken {
			return
		}
		if !streaming {
			streaming = true
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
		}
		var err error
		if b == nil {
			_, err = io.WriteString(w, ": keep-alive\n\n")
		} else {
			_, err = fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			broken = true
			cancel()
		}
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case b := <-s.outbox:
			event(b)
		case <-tick.C:
			if streaming {
				event(nil)
			}
		case resp := <-answer:
			// What the request said before its answer goes first.
			for more := true; more; {
				select {
				case b := <-s.outbox:
					event(b)
				default:
					more = false
				}
			}
			switch {
			case streaming:
				if resp != nil {
					event(resp)
				}
			case resp == nil:
				w.WriteHeader(http.StatusAccepted)
			default:
				writeJSON(w, answerStatus(resp), resp)
			}
			return
		}
	}
}
