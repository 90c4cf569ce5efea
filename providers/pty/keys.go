package pty

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/vt"
)

// namedKeys maps a normalised key name (lowercase, no '-', '_' or spaces)
// to the key the emulator encodes. The emulator, not this table, turns a key
// into bytes, so cursor keys follow the program's application-cursor mode.
var namedKeys = map[string]rune{
	"enter": vt.KeyEnter, "return": vt.KeyEnter, "cr": vt.KeyEnter,
	"tab":       vt.KeyTab,
	"backspace": vt.KeyBackspace, "bs": vt.KeyBackspace,
	"escape": vt.KeyEscape, "esc": vt.KeyEscape,
	"space": vt.KeySpace,
	"up":    vt.KeyUp, "down": vt.KeyDown, "left": vt.KeyLeft, "right": vt.KeyRight,
	"home": vt.KeyHome, "end": vt.KeyEnd,
	"pageup": vt.KeyPgUp, "pgup": vt.KeyPgUp,
	"pagedown": vt.KeyPgDown, "pgdown": vt.KeyPgDown, "pgdn": vt.KeyPgDown,
	"insert": vt.KeyInsert, "ins": vt.KeyInsert,
	"delete": vt.KeyDelete, "del": vt.KeyDelete,
	"f1": vt.KeyF1, "f2": vt.KeyF2, "f3": vt.KeyF3, "f4": vt.KeyF4,
	"f5": vt.KeyF5, "f6": vt.KeyF6, "f7": vt.KeyF7, "f8": vt.KeyF8,
	"f9": vt.KeyF9, "f10": vt.KeyF10, "f11": vt.KeyF11, "f12": vt.KeyF12,
}

// KeyHelp names the accepted key forms; error messages repeat it so a model
// can correct a key without reading the docs.
const KeyHelp = "Enter, Tab, Backspace, Escape, Space, Up, Down, Left, Right, Home, End, " +
	"PageUp, PageDown, Insert, Delete, F1…F12, Ctrl-A…Ctrl-Z (also Ctrl-@ [ \\ ] ^ _), " +
	"Alt-<key>, Shift-Tab, or a single character"

// ctrlChars are the non-letter characters a terminal can send with Ctrl.
const ctrlChars = "@[\\]^_ "

// modifier prefixes, matched case-insensitively; longest first so "ctrl-"
// wins over "c-".
var modPrefixes = []struct {
	prefix string
	mod    vt.KeyMod
}{
	{"control-", vt.ModCtrl}, {"control+", vt.ModCtrl},
	{"ctrl-", vt.ModCtrl}, {"ctrl+", vt.ModCtrl}, {"c-", vt.ModCtrl},
	{"meta-", vt.ModAlt}, {"meta+", vt.ModAlt},
	{"alt-", vt.ModAlt}, {"alt+", vt.ModAlt}, {"m-", vt.ModAlt},
	{"shift-", vt.ModShift}, {"shift+", vt.ModShift}, {"s-", vt.ModShift},
}

// ParseKey turns a key name ("Enter", "Ctrl-C", "^C", "C-c", "Alt-x",
// "Shift-Tab", "PageDown", "F5", "q") into the key event the emulator
// encodes. Names are case-insensitive. A combination no terminal can send
// (Ctrl-Up, Shift-F3) is an error rather than something silently dropped.
func ParseKey(name string) (vt.KeyPressEvent, error) {
	var mods vt.KeyMod
	rest := name
	if len(rest) == 2 && rest[0] == '^' {
		mods |= vt.ModCtrl
		rest = rest[1:]
	}
	for stripped := true; stripped && utf8.RuneCountInString(rest) > 1; {
		stripped = false
		for _, p := range modPrefixes {
			if len(rest) > len(p.prefix) && strings.EqualFold(rest[:len(p.prefix)], p.prefix) {
				mods |= p.mod
				rest = rest[len(p.prefix):]
				stripped = true
				break
			}
		}
	}
	if rest == "" {
		return vt.KeyPressEvent{}, keyError(name, "it is empty")
	}

	var k vt.KeyPressEvent
	if r, size := utf8.DecodeRuneInString(rest); size == len(rest) && r != utf8.RuneError {
		k = vt.KeyPressEvent{Code: r, Text: rest}
	} else {
		norm := strings.Map(func(r rune) rune {
			if r == '-' || r == '_' || r == ' ' {
				return -1
			}
			return unicode.ToLower(r)
		}, rest)
		code, ok := namedKeys[norm]
		if !ok {
			return vt.KeyPressEvent{}, keyError(name, "no key has that name")
		}
		k = vt.KeyPressEvent{Code: code}
		if code == vt.KeySpace {
			k.Text = " "
		}
	}

	if mods&vt.ModShift != 0 {
		switch {
		case k.Code == vt.KeyTab:
			k.Mod |= vt.ModShift
		case k.Text != "" && unicode.IsLetter(k.Code):
			k.Text = strings.ToUpper(k.Text)
			k.Code = unicode.ToUpper(k.Code)
		default:
			return vt.KeyPressEvent{}, keyError(name, "Shift combines only with Tab and letters")
		}
	}
	if mods&vt.ModCtrl != 0 {
		c := unicode.ToLower(k.Code)
		switch {
		case k.Text != "" && c >= 'a' && c <= 'z':
			k = vt.KeyPressEvent{Code: c, Mod: vt.ModCtrl}
		case k.Code == '@' || k.Code == vt.KeySpace:
			k = vt.KeyPressEvent{Code: vt.KeySpace, Mod: vt.ModCtrl}
		case k.Text != "" && strings.ContainsRune(ctrlChars, k.Code):
			k = vt.KeyPressEvent{Code: k.Code, Mod: vt.ModCtrl}
		default:
			return vt.KeyPressEvent{}, keyError(name, "Ctrl combines only with letters and @ [ \\ ] ^ _ Space")
		}
	}
	if mods&vt.ModAlt != 0 {
		k.Mod |= vt.ModAlt
	}
	return k, nil
}

// ParseKeys parses every name, failing on the first bad one.
func ParseKeys(names []string) ([]vt.KeyPressEvent, error) {
	out := make([]vt.KeyPressEvent, 0, len(names))
	for _, n := range names {
		k, err := ParseKey(n)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

func keyError(name, why string) error {
	return fmt.Errorf("unknown key %q (%s); keys are %s", name, why, KeyHelp)
}
