package shell
import ("testing";"os";"mvdan.cc/sh/v3/syntax")
func TestZZ(t *testing.T){ f,_:=Parse("echo ${10} ${1}\n"); syntax.DebugPrint(os.Stdout,f.Stmts[0].Cmd.(*syntax.CallExpr).Args[1]) }
