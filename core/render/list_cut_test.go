package render

import (
	"strconv"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/value"
)

func TestRenderLongListOfStringsCutsItems(t *testing.T) {
	l := make(value.List, 300000)
	for i := range l {
		l[i] = value.Str(strconv.Itoa(i + 1))
	}
	out := Render(l, TextLimit)
	last := out[strings.LastIndexByte(strings.TrimRight(out, "\n"), '\n')+1:]
	if !strings.Contains(last, "of 300000") || !strings.Contains(last, "slice=") {
		t.Fatalf("last line %q; want an items cut naming 300000 and the next slice", last)
	}
}
