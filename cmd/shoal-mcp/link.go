package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/sdk/client"
)

// link is the facade's request connection to the kernel, shared by every
// MCP session of the process (they all act as the same session and
// principal). It redials when the connection has ended, which starts a
// new kernel if the old one is gone.
type link struct {
	dial dialer

	mu sync.Mutex
	c  *client.Client
}

func (l *link) client(ctx context.Context) (*client.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		select {
		case <-l.c.Done():
			l.c = nil
		default:
			return l.c, nil
		}
	}
	c, err := l.dial(ctx, nil)
	if err != nil {
		return nil, err
	}
	l.c = c
	return c, nil
}

// call makes one kernel call. A call is never retried: an exec that
// reached the kernel before the connection broke has run.
func (l *link) call(ctx context.Context, method string, params, result any) error {
	c, err := l.client(ctx)
	if err != nil {
		return err
	}
	return c.Call(ctx, method, params, result)
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
}

// kernelError describes a failed kernel call for a model: the kernel's
// code name, number and message, prefixed "kernel error:", so the text
// alone says what went wrong and usually what to do next.
func kernelError(err error) string {
	var re *rpc.Error
	if errors.As(err, &re) {
		return "kernel error: " + re.Error()
	}
	if errors.Is(err, context.Canceled) {
		return "kernel error: the request was cancelled"
	}
	return fmt.Sprintf("kernel error: %v (the kernel may have stopped; calling again reconnects or starts a new one)", err)
}

// errorData is the JSON-RPC error data the facade sends for a kernel
// error: the kernel's own code and name, beside whatever data it gave.
func errorData(err error) map[string]any {
	var re *rpc.Error
	if !errors.As(err, &re) {
		return map[string]any{"code": int(rpc.Unavailable), "name": rpc.Unavailable.Name()}
	}
	data := map[string]any{}
	if re.Data != nil {
		// Data arrives decoded as JSON; keep its fields when it is an object.
		if raw, err := json.Marshal(re.Data); err == nil {
			_ = json.Unmarshal(raw, &data)
		}
	}
	data["code"] = int(re.Code)
	data["name"] = re.Code.Name()
	return data
}

// mcpCode picks the JSON-RPC code an MCP client sees for a kernel error
// on a resource request: invalid params for the caller's mistakes, MCP's
// resource-not-found for unknown targets, internal error otherwise.
func mcpCode(err error) int {
	var re *rpc.Error
	if !errors.As(err, &re) {
		return int(rpc.Internal)
	}
	switch re.Code {
	case rpc.InvalidParams, rpc.BadPath, rpc.BadURI, rpc.BadSlice, rpc.TooLarge, rpc.UnknownPTY:
		return int(rpc.InvalidParams)
	case rpc.NotFound:
		return codeResourceNotFound
	default:
		return int(rpc.Internal)
	}
}

// codeResourceNotFound is MCP's error code for an unknown resource.
const codeResourceNotFound = -32002
