// Command hostile is a provider plugin that misbehaves on request: the
// first URI segment picks the misdeed. The plugins tests use it to check
// that each one fails only its own call.
package main

import (
	"os"
	"strings"
	"time"

	"github.com/shoal-sh/shoal/sdk"
)

var sink [][]byte

func init() {
	sdk.RegisterProvider(sdk.Provider{
		Family:    "hostile",
		Templates: []sdk.Template{{URITemplate: "shoal://hostile/{misdeed}", Name: "misdeed"}},
		Read:      read,
	})
}

func read(req *sdk.ReadRequest) (any, error) {
	if len(req.Segments) == 0 {
		return sdk.Str("pick a misdeed"), nil
	}
	switch req.Segments[0] {
	case "ok":
		return sdk.Record(sdk.F("fine", sdk.Bool(true))), nil
	case "record":
		return map[string]any{"plain": "json", "n": 1}, nil
	case "loop":
		for n := 0; ; n++ {
			if n < 0 {
				break
			}
		}
	case "nested": // an endless loop in a function called from a loop
		for n := 0; ; n++ {
			n += spin(n)
		}
	case "sleep": // blocked in the host (poll_oneoff), a millisecond at a time
		for {
			time.Sleep(time.Millisecond)
		}
	case "bomb":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "panic":
		panic("hostile plugin panics on purpose")
	case "deadlock":
		select {}
	case "receive":
		<-make(chan int)
	case "huge":
		return sdk.Bytes(make([]byte, 7<<20)), nil // 9.3 MiB in base64
	case "exit":
		os.Exit(7)
	case "open":
		f, err := os.Open("/" + strings.Join(req.Segments[1:], "/"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b := make([]byte, 64)
		n, _ := f.Read(b)
		return sdk.Str(string(b[:n])), nil
	case "env":
		v, ok := os.LookupEnv(req.Segments[1])
		if !ok {
			return nil, sdk.Errorf(sdk.Failed, "environment variable %s is not visible", req.Segments[1])
		}
		return sdk.Str(v), nil
	case "chatty":
		for i := range 1000 {
			println("line", i)
		}
		return sdk.Int(1000), nil
	case "clock":
		return sdk.Int(int64(time.Now().Year())), nil
	case "badtable":
		return sdk.Table([]string{"a", "b"}, []sdk.Value{sdk.Int(1)}), nil
	}
	return nil, sdk.Errorf(sdk.NotFound, "no misdeed %q", req.Segments[0])
}

//go:noinline
func spin(n int) int {
	for {
		if n < 0 {
			return n
		}
	}
}

func main() {}
