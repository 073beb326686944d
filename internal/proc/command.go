package proc

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// CommandErrorKind says why ParseCommand refused a command line.
type CommandErrorKind int

const (
	// KindSyntax: the line is empty, does not parse (an unterminated quote, a trailing backslash) or
	// cannot be an argv (a NUL byte, a carriage return, an empty program name).
	KindSyntax CommandErrorKind = iota + 1
	// KindShellFeature: the line parses but uses something only a shell would interpret: operators,
	// lists, redirections, expansions, globs, a leading ~, assignments, comments, subshells, blocks.
	KindShellFeature
)

func (k CommandErrorKind) String() string {
	switch k {
	case KindSyntax:
		return "syntax"
	case KindShellFeature:
		return "shell feature"
	}
	return fmt.Sprintf("CommandErrorKind(%d)", int(k))
}

// CommandError is the error ParseCommand returns.
type CommandError struct {
	Command string // the line as given
	Kind    CommandErrorKind
	Reason  string // what is wrong, without the command
}

// Error reads like `command "a | b": pipes are not allowed (commands run without a shell)`.
func (e *CommandError) Error() string { return fmt.Sprintf("command %q: %s", e.Command, e.Reason) }

// noShell ends most refusals: the user wrote shell syntax, but nothing will interpret it.
const noShell = "(commands run without a shell)"

// ParseCommand splits one command line into argv with POSIX shell quoting rules and accepts only a single
// simple command made of literal words.
//
// Quotes and backslashes are removed as a POSIX shell would, which matches Python's shlex.split except
// that inside double quotes a backslash also escapes $ and `. Anything a shell would expand or interpret
// (operators, redirections, expansions, globs, a leading ~, assignments, comments) is refused rather
// than passed on literally, because no shell will ever see the words.
//
// Every error is a *CommandError.
func ParseCommand(line string) ([]string, error) {
	if strings.TrimSpace(line) == "" {
		return nil, refuse(line, KindSyntax, "the command is empty")
	}
	// The parser silently drops NUL bytes; refuse them instead, as no argv can carry one.
	if strings.ContainsRune(line, 0) {
		return nil, refuse(line, KindSyntax, "NUL bytes are not allowed (no program argument can contain one)")
	}
	// The parser reads CR LF as a newline even inside quotes, and drops a CR at the end of a word, so
	// the argv would not hold the bytes written; a CR in a command line is a stray Windows line ending.
	if strings.ContainsRune(line, '\r') {
		return nil, refuse(line, KindSyntax, "carriage returns (\\r) are not allowed (a CR LF line ending would silently become a newline)")
	}
	parser := syntax.NewParser(syntax.Variant(syntax.LangPOSIX), syntax.KeepComments(true))
	file, err := parser.Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, refuse(line, KindSyntax, "not a valid POSIX shell command line: %v", err)
	}
	if len(file.Last) > 0 {
		return nil, refuse(line, KindShellFeature, "comments are not allowed %s; quote '#' to pass it literally", noShell)
	}
	if len(file.Stmts) == 0 {
		return nil, refuse(line, KindSyntax, "the command is empty")
	}
	for _, st := range file.Stmts {
		if st.Background {
			return nil, refuse(line, KindShellFeature, "running in the background with '&' is not allowed %s", noShell)
		}
	}
	if len(file.Stmts) > 1 {
		return nil, refuse(line, KindShellFeature, "only one command is allowed, not a list separated by ';' or newlines %s", noShell)
	}
	return simpleCommand(line, file.Stmts[0])
}

func simpleCommand(line string, st *syntax.Stmt) ([]string, error) {
	switch {
	case len(st.Comments) > 0:
		return nil, refuse(line, KindShellFeature, "comments are not allowed %s; quote '#' to pass it literally", noShell)
	case st.Semicolon.IsValid():
		return nil, refuse(line, KindShellFeature, "';' is not allowed %s", noShell)
	case st.Negated:
		return nil, refuse(line, KindShellFeature, "negation with '!' is not allowed %s", noShell)
	case len(st.Redirs) > 0:
		switch st.Redirs[0].Op {
		case syntax.Hdoc, syntax.DashHdoc:
			return nil, refuse(line, KindShellFeature, "heredocs are not allowed %s", noShell)
		}
		return nil, refuse(line, KindShellFeature, "redirections are not allowed %s; output is captured for you", noShell)
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok {
		return nil, refuse(line, KindShellFeature, "%s are not allowed %s", compoundName(st.Cmd), noShell)
	}
	if len(call.Assigns) > 0 {
		as := call.Assigns[0]
		return nil, refuse(line, KindShellFeature, "variable assignments such as %q are not allowed %s", line[as.Pos().Offset():as.End().Offset()], noShell)
	}
	argv := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		arg, err := literalWord(w)
		if err != nil {
			word := line[w.Pos().Offset():w.End().Offset()]
			kind := KindShellFeature
			if errors.Is(err, errTrailingBackslash) {
				kind = KindSyntax
			}
			return nil, refuse(line, kind, "in word %q, %v", word, err)
		}
		argv = append(argv, arg)
	}
	if argv[0] == "" {
		return nil, refuse(line, KindSyntax, "the program name is empty")
	}
	return argv, nil
}

// compoundName names, in the plural, the shell construct that cmd is, for an error message.
func compoundName(cmd syntax.Command) string {
	switch c := cmd.(type) {
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.Pipe, syntax.PipeAll:
			return "pipes"
		case syntax.AndStmt:
			return "'&&' lists"
		case syntax.OrStmt:
			return "'||' lists"
		}
	case *syntax.Subshell:
		return "subshells '( )'"
	case *syntax.Block:
		return "'{ }' blocks"
	case *syntax.FuncDecl:
		return "function definitions"
	case *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause:
		return "control structures (if, while, until, for, case)"
	}
	return "compound commands"
}

// literalWord removes the quotes from a word made only of literal text and refuses everything a shell
// would expand.
func literalWord(w *syntax.Word) (string, error) {
	var sb strings.Builder
	parts := w.Parts
	for i := 0; i < len(parts); i++ {
		switch p := parts[i].(type) {
		case *syntax.Lit:
			// The parser splits literal text at each '$' and some line continuations; escapes and the
			// checks for expansions work on the whole.
			start, text := i, p.Value
			for i+1 < len(parts) {
				next, ok := parts[i+1].(*syntax.Lit)
				if !ok {
					break
				}
				text += next.Value
				i++
			}
			quoteNext := false
			if i+1 < len(parts) {
				switch parts[i+1].(type) {
				case *syntax.SglQuoted, *syntax.DblQuoted:
					quoteNext = true
				}
			}
			if err := unquotedLit(&sb, text, start == 0, quoteNext); err != nil {
				return "", err
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", errors.New("$'...' quoting is not allowed; use plain single quotes")
			}
			sb.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", errors.New(`$"..." quoting is not allowed; use plain double quotes`)
			}
			// As for unquoted text, the parser may split this at each '$' and line continuation.
			var text strings.Builder
			for _, inner := range p.Parts {
				lit, ok := inner.(*syntax.Lit)
				if !ok {
					return "", expansionError(inner)
				}
				text.WriteString(lit.Value)
			}
			if err := doubleQuotedText(&sb, text.String()); err != nil {
				return "", err
			}
		default:
			return "", expansionError(p)
		}
	}
	return sb.String(), nil
}

// errTrailingBackslash is the one word error that is malformed input rather than a shell feature.
var errTrailingBackslash = errors.New("a trailing backslash escapes nothing")

// unquotedLit appends the unquoted literal s with its backslash escapes removed.
func unquotedLit(sb *strings.Builder, s string, wordStart, quoteNext bool) error {
	s = dropContinuations(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 == len(s) {
				return errTrailingBackslash
			}
			i++
			sb.WriteByte(s[i])
		case c == '*' || c == '?' || c == '[':
			return fmt.Errorf("the unquoted glob character %q is not allowed: no shell will expand it; quote it to pass it literally", c)
		case c == '~' && wordStart && i == 0:
			return errors.New("an unquoted leading '~' is not allowed: no shell will expand it to a home directory; write the path out or quote it")
		case c == '$' && quoteNext && i+1 == len(s):
			return errors.New(`$'...' and $"..." quoting are not allowed; use plain quotes`)
		case c == '$' && i+1 < len(s) && startsExpansion(s[i+1]):
			return dollarError(s[i+1])
		default:
			sb.WriteByte(c)
		}
	}
	return nil
}

// doubleQuotedText appends s, literal text from inside double quotes, where a backslash escapes only
// $, `, ", \ and newline and otherwise stands for itself.
func doubleQuotedText(sb *strings.Builder, s string) error {
	s = dropContinuations(s)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0:
			i++
		case s[i] == '$' && i+1 < len(s) && startsExpansion(s[i+1]):
			return dollarError(s[i+1])
		}
		sb.WriteByte(s[i])
	}
	return nil
}

// dropContinuations removes backslash-newline line continuations from s, raw text in which a backslash
// escapes the next character. The parser removes most of them but keeps one that follows an escaped
// backslash, as in `a\\\<newline>b`.
func dropContinuations(s string) string {
	if !strings.Contains(s, "\\\n") {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// startsExpansion reports whether c after a '$' makes a shell expand it. The parser turns such text into
// expansion nodes, but misses the ones that a line continuation splits, as in "$\<newline>HOME"; bash
// also expands "$[1+1]", which POSIX shells keep as is.
func startsExpansion(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("{([@*#?$!-", c) >= 0
}

func dollarError(next byte) error {
	return fmt.Errorf("'$' followed by %q is not allowed: a shell would expand it; write '\\$' or use single quotes", next)
}

// expansionError explains why a non-literal word part is refused.
func expansionError(part syntax.WordPart) error {
	var what string
	switch p := part.(type) {
	case *syntax.ParamExp:
		what = "parameter expansion ($VAR, ${...})"
	case *syntax.CmdSubst:
		what = "command substitution ($(...))"
		if p.Backquotes {
			what = "command substitution (backquotes)"
		}
	case *syntax.ArithmExp:
		what = "arithmetic expansion ($((...)))"
	default:
		what = "shell expansion"
	}
	return fmt.Errorf("%s is not allowed: no shell will expand it; quote a literal '$' or '`' with single quotes", what)
}

func refuse(line string, kind CommandErrorKind, format string, args ...any) error {
	return &CommandError{Command: line, Kind: kind, Reason: fmt.Sprintf(format, args...)}
}
