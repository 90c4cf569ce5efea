package plan

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// script20 is a 20-line script of ordinary work.
const script20 = `set -e
cd build
for f in a.o b.o; do
  rm -f "$f"
done
mkdir -p out
cp ../existing.txt out/
echo "done" > out/log.txt
git status
grep -r TODO . > todo.txt || true
if [ -f Makefile ]; then
  make -j4
fi
export BUILD=1
curl -fsSL https://example.com/data.json -o data.json
jq .items data.json
tar czf out.tgz out
ls -la
wc -l todo.txt
emit user.build '{"ok":true}'
`

// BenchmarkPlanCreate measures plan.create (analysis, estimates, policy,
// snapshot) on a 20-line script against the baseline of parsing the same
// script alone; the ratio is the cost of planning over reading.
func BenchmarkPlanCreate(b *testing.B) {
	if n := strings.Count(script20, "\n"); n != 20 {
		b.Fatalf("script has %d lines", n)
	}
	b.Run("parse-baseline", func(b *testing.B) {
		for b.Loop() {
			if _, err := syntax.NewParser().Parse(strings.NewReader(script20), ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("analyze", func(b *testing.B) {
		r := newRig(b)
		env := r.p.envFor(r.caller("main", "agent:a"), r.dir)
		for b.Loop() {
			if _, err := analyze.Analyze(script20, env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("create", func(b *testing.B) {
		r := newRig(b)
		c := r.caller("main", "agent:a")
		for b.Loop() {
			if _, err := r.p.Create(r.ctx, c, script20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exec-check", func(b *testing.B) {
		r := newRig(b)
		c := r.caller("main", "agent:a")
		for b.Loop() {
			_ = r.p.CheckExec(r.ctx, c, nil, script20, r.dir, nil, nil)
		}
	})
}

func BenchmarkCheckTrue(b *testing.B) {
	r := newRig(b)
	c := r.caller("main", "agent:a")
	f, _ := syntax.NewParser().Parse(strings.NewReader("/bin/true"), "")
	for b.Loop() {
		_ = r.p.CheckExec(r.ctx, c, f, "/bin/true", r.dir, nil, nil)
	}
}
