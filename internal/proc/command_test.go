package proc

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseCommandAccepts(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []string
	}{
		{"plain words", "python -m pytest -q", []string{"python", "-m", "pytest", "-q"}},
		{"extra blanks", " \t a   b\t", []string{"a", "b"}},
		{"trailing newline", "a b\n", []string{"a", "b"}},
		{"semicolon inside double quotes", `python -c "import x; print(1)"`, []string{"python", "-c", "import x; print(1)"}},
		{"multi-line python in double quotes", "python -c \"import a\nprint(1)\"", []string{"python", "-c", "import a\nprint(1)"}},
		{"single quotes keep everything", `echo '$HOME "x" \n *'`, []string{"echo", `$HOME "x" \n *`}},
		{"escaped double quote in double quotes", `echo "say \"hi\""`, []string{"echo", `say "hi"`}},
		{"double quotes keep other backslashes", `echo "a\nb\\c\$d\` + "`" + `"`, []string{"echo", `a\nb\c$d` + "`"}},
		{"backslash escapes outside quotes", `echo a\ b \"c\" \\ \$x \'`, []string{"echo", "a b", `"c"`, `\`, "$x", "'"}},
		{"escaped glob characters", `ls \*.py x\?`, []string{"ls", "*.py", "x?"}},
		{"quoted glob characters", `ls '*.py' "x[1]"`, []string{"ls", "*.py", "x[1]"}},
		{"empty string argument", `a '' ""`, []string{"a", "", ""}},
		{"adjacent quoted parts", `a"b"'c'`, []string{"abc"}},
		{"line continuation", "a \\\n b\\\nc", []string{"a", "bc"}},
		{"line continuation after an escaped backslash", "a\\\\\\\nb", []string{`a\b`}},
		{"line continuation in double quotes", "\"a\\\nb\"", []string{"ab"}},
		{"hash inside a word", "a#b c", []string{"a#b", "c"}},
		{"tilde not at start", `a~ --prefix=~/x '~' \~`, []string{"a~", "--prefix=~/x", "~", "~"}},
		{"escaped dollar bracket in double quotes", `echo "\$[1]"`, []string{"echo", "$[1]"}},
		{"lone dollar", `echo $ a$`, []string{"echo", "$", "a$"}},
		{"braces are literal in POSIX", `find . -name x -exec rm {} \;`, []string{"find", ".", "-name", "x", "-exec", "rm", "{}", ";"}},
		{"bang as an argument", `a ! b`, []string{"a", "!", "b"}},
		{"unicode", `echo é "中文"`, []string{"echo", "é", "中文"}},
		{"escaped unicode", `echo \é`, []string{"echo", "é"}},
		{"keyword as an argument", `echo if then fi`, []string{"echo", "if", "then", "fi"}},
		{"equals sign in a quoted first word", `'a=b' c`, []string{"a=b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCommand(tt.line)
			if err != nil {
				t.Fatalf("ParseCommand(%q): %v", tt.line, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseCommand(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}

func TestParseCommandRefuses(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string // a substring of the error
	}{
		{"empty", "", "the command is empty"},
		{"blank", " \t\n", "the command is empty"},
		{"only a comment", "# hi", "comments are not allowed"},
		{"trailing comment", "a # hi", "comments are not allowed"},
		{"comment on a later line", "a\n# hi", "comments are not allowed"},
		{"pipe", "a | b", `command "a | b": pipes are not allowed (commands run without a shell)`},
		{"and", "a && b", "'&&' lists are not allowed"},
		{"or", "a || b", "'||' lists are not allowed"},
		{"semicolon list", "a; b", "only one command is allowed"},
		{"newline list", "a\nb", "only one command is allowed"},
		{"trailing semicolon", "a;", "';' is not allowed"},
		{"background", "a &", "background"},
		{"background list", "a & b", "background"},
		{"negation", "! a", "negation"},
		{"output redirection", "a > out", "redirections are not allowed"},
		{"fd redirection", "a 2>&1", "redirections are not allowed"},
		{"input redirection", "a < in", "redirections are not allowed"},
		{"bash-only redirection", "a &> out", "not a valid POSIX shell command line"},
		{"heredoc", "cat <<EOF\nx\nEOF\n", "heredocs are not allowed"},
		{"variable", "echo $HOME", `in word "$HOME", parameter expansion`},
		{"braced variable", "echo ${HOME}", "parameter expansion"},
		{"variable in double quotes", `echo "a $HOME"`, "parameter expansion"},
		{"special parameter", "echo $1", "parameter expansion"},
		{"command substitution", "echo $(id)", "command substitution ($(...))"},
		{"backquotes", "echo `id`", "command substitution (backquotes)"},
		{"backquotes in double quotes", "echo \"`id`\"", "command substitution"},
		{"arithmetic", "echo $((1+2))", "arithmetic expansion"},
		{"arithmetic command", "((1+2))", "subshells"},
		{"subshell", "(a)", "subshells '( )' are not allowed"},
		{"block", "{ a; }", "'{ }' blocks are not allowed"},
		{"if", "if a; then b; fi", "control structures"},
		{"for", "for i in a; do b; done", "control structures"},
		{"while", "while a; do b; done", "control structures"},
		{"case", "case a in a) b;; esac", "control structures"},
		{"function", "f() { a; }", "function definitions"},
		{"assignment before command", "FOO=1 cmd", `variable assignments such as "FOO=1" are not allowed`},
		{"assignment alone", "FOO=1", "variable assignments"},
		{"star", "ls *.py", `in word "*.py", the unquoted glob character '*' is not allowed`},
		{"question mark", "ls a?", "glob character '?'"},
		{"bracket", "pytest t.py::test[1]", "glob character '['"},
		{"test bracket", "[ -f x ]", "glob character '['"},
		{"leading tilde", "ls ~/x", "leading '~'"},
		{"bare tilde", "cd ~", "leading '~'"},
		{"dollar single quotes", "echo $'a\\n'", `$'...' and $"..." quoting are not allowed`},
		{"dollar double quotes", `echo a$"x"`, `$'...' and $"..." quoting are not allowed`},
		{"bash arithmetic in double quotes", `echo "$[1+1]"`, `'$' followed by '[' is not allowed: a shell would expand it`},
		{"variable split by a line continuation", "echo $\\\nHOME", "parameter expansion"},
		{"bash arithmetic", "echo $[1+1]", `'$' followed by '[' is not allowed`},
		{"variable split by a line continuation in double quotes", "echo \"$\\\n$\"", `'$' followed by '$' is not allowed`},
		{"trailing backslash", `echo a\`, "a trailing backslash escapes nothing"},
		{"unclosed single quote", "echo 'a", "reached EOF without closing quote"},
		{"unclosed double quote", `echo "a`, "reached EOF without closing quote"},
		{"NUL byte", "echo a\x00b", "NUL bytes are not allowed"},
		{"CR LF in quotes", "echo 'a\r\nb'", "carriage returns (\\r) are not allowed"},
		{"trailing CR", "echo a\r", "carriage returns (\\r) are not allowed"},
		{"invalid UTF-8", "echo \xff", "not a valid POSIX shell command line"},
		{"empty program name", "'' a", "the program name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCommand(tt.line)
			if err == nil {
				t.Fatalf("ParseCommand(%q) = %q, want an error containing %q", tt.line, got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseCommand(%q) error = %q, want it to contain %q", tt.line, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "command "+strconv.Quote(tt.line)+": ") {
				t.Errorf("ParseCommand(%q) error = %q, want it to start by quoting the command", tt.line, err)
			}
			var ce *CommandError
			if !errors.As(err, &ce) || ce.Command != tt.line {
				t.Errorf("ParseCommand(%q) error %#v is not a *CommandError for the line", tt.line, err)
			}
		})
	}
}

func TestParseCommandErrorKinds(t *testing.T) {
	tests := []struct {
		line string
		want CommandErrorKind
	}{
		{"", KindSyntax},
		{"echo 'a", KindSyntax},
		{`echo "a`, KindSyntax},
		{`echo a\`, KindSyntax},
		{"echo a\x00b", KindSyntax},
		{"'' a", KindSyntax},
		{"a &> out", KindSyntax}, // bash-only: not POSIX, so it does not parse
		{"a | b", KindShellFeature},
		{"a; b", KindShellFeature},
		{"a > out", KindShellFeature},
		{"echo $HOME", KindShellFeature},
		{"ls *.py", KindShellFeature},
		{"FOO=1 cmd", KindShellFeature},
		{"a # hi", KindShellFeature},
		{"(a)", KindShellFeature},
	}
	for _, tt := range tests {
		_, err := ParseCommand(tt.line)
		var ce *CommandError
		if !errors.As(err, &ce) {
			t.Errorf("ParseCommand(%q) error = %v, want a *CommandError", tt.line, err)
			continue
		}
		if ce.Kind != tt.want {
			t.Errorf("ParseCommand(%q) kind = %v, want %v (%s)", tt.line, ce.Kind, tt.want, ce.Reason)
		}
		if ce.Error() != "command "+strconv.Quote(tt.line)+": "+ce.Reason {
			t.Errorf("ParseCommand(%q) Error() = %q does not join the command and the reason", tt.line, ce.Error())
		}
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{
		`python -c "import x; print(1)"`,
		`a"b"'c' '' \ \\ \"`,
		"a \\\n b \"c\nd\"",
		"a | b && c; d &",
		"echo $HOME ${x} $(id) `id` $((1)) ~ *.py",
		"FOO=1 cmd > out 2>&1 <<EOF\nx\nEOF\n",
		"{ a; } (b) # c",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		argv, err := ParseCommand(line)
		if err != nil {
			var ce *CommandError
			if !errors.As(err, &ce) || ce.Command != line || ce.Reason == "" || (ce.Kind != KindSyntax && ce.Kind != KindShellFeature) {
				t.Fatalf("ParseCommand(%q) error %#v is not a *CommandError naming the line, a kind and a reason", line, err)
			}
			return
		}
		if len(argv) == 0 {
			t.Fatalf("ParseCommand(%q) accepted an empty argv", line)
		}
		quoted := make([]string, len(argv))
		for i, arg := range argv {
			quoted[i] = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
		}
		requoted := strings.Join(quoted, " ")
		again, err := ParseCommand(requoted)
		if err != nil {
			t.Fatalf("ParseCommand(%q) = %q, but its requoting %q fails: %v", line, argv, requoted, err)
		}
		if !slices.Equal(again, argv) {
			t.Fatalf("ParseCommand(%q) = %q, but its requoting %q parses as %q", line, argv, requoted, again)
		}
	})
}
