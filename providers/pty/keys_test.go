package pty

import (
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/x/vt"
)

// encode runs keys through a fresh emulator and returns the bytes it would
// send to the program, optionally after the program switched on
// application cursor keys.
func encode(t testing.TB, appCursor bool, keys ...vt.KeyPressEvent) string {
	t.Helper()
	e := vt.NewEmulator(20, 5)
	if appCursor {
		_, _ = e.Write([]byte("\x1b[?1h"))
	}
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(e)
		done <- string(b)
	}()
	for _, k := range keys {
		e.SendKey(k)
	}
	_ = e.InputPipe().(io.Closer).Close()
	return <-done
}

var keyTests = []struct {
	name      string
	want      string // bytes sent; "" means the name is refused
	appCursor bool
}{
	{"Enter", "\r", false},
	{"enter", "\r", false},
	{"Return", "\r", false},
	{"Tab", "\t", false},
	{"Shift-Tab", "\x1b[Z", false},
	{"Backspace", "\x7f", false},
	{"Escape", "\x1b", false},
	{"Esc", "\x1b", false},
	{"Space", " ", false},
	{"Up", "\x1b[A", false},
	{"Up", "\x1bOA", true},
	{"Down", "\x1b[B", false},
	{"Right", "\x1b[C", false},
	{"Left", "\x1bOD", true},
	{"Home", "\x1b[H", false},
	{"End", "\x1b[F", false},
	{"PageUp", "\x1b[5~", false},
	{"Page_Up", "\x1b[5~", false},
	{"PgDn", "\x1b[6~", false},
	{"page down", "\x1b[6~", false},
	{"Insert", "\x1b[2~", false},
	{"Delete", "\x1b[3~", false},
	{"F1", "\x1bOP", false},
	{"F5", "\x1b[15~", false},
	{"F12", "\x1b[24~", false},
	{"Ctrl-A", "\x01", false},
	{"Ctrl-C", "\x03", false},
	{"ctrl+c", "\x03", false},
	{"C-c", "\x03", false},
	{"^C", "\x03", false},
	{"^c", "\x03", false},
	{"Ctrl-D", "\x04", false},
	{"Ctrl-Z", "\x1a", false},
	{"Ctrl-[", "\x1b", false},
	{"Ctrl-@", "\x00", false},
	{"Ctrl-Space", "\x00", false},
	{"Ctrl-_", "\x1f", false},
	{"Alt-x", "\x1bx", false},
	{"M-x", "\x1bx", false},
	{"Alt-Ctrl-C", "\x1b\x03", false},
	{"Shift-a", "A", false},
	{"q", "q", false},
	{"Q", "Q", false},
	{"-", "-", false},
	{"é", "é", false},
	{"^", "^", false},
	{"Ctrl-Up", "", false},
	{"Shift-F3", "", false},
	{"F13", "", false},
	{"Hyper-x", "", false},
	{"Entr", "", false},
	{"", "", false},
	{"Ctrl-", "", false},
	{"Ctrl-1", "", false},
}

func TestParseKey(t *testing.T) {
	for _, tt := range keyTests {
		k, err := ParseKey(tt.name)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseKey(%q) = %+v, want an error", tt.name, k)
			} else if !strings.Contains(err.Error(), "Ctrl-A") {
				t.Errorf("ParseKey(%q) error %q does not list the accepted keys", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseKey(%q): %v", tt.name, err)
			continue
		}
		if got := encode(t, tt.appCursor, k); got != tt.want {
			t.Errorf("ParseKey(%q) sends %q, want %q", tt.name, got, tt.want)
		}
	}
}

// FuzzParseKey checks that every accepted key name makes the emulator send
// at least one byte: a key that parses but sends nothing would be lost
// input.
func FuzzParseKey(f *testing.F) {
	for _, tt := range keyTests {
		f.Add(tt.name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		k, err := ParseKey(name)
		if err != nil {
			return
		}
		if got := encode(t, false, k); got == "" {
			t.Fatalf("ParseKey(%q) = %+v, which sends nothing", name, k)
		}
	})
}
