//go:build cgo

package repomap

import (
	"path"
	"strings"

	sitter "github.com/smacker/go-tree-sitter"
	"github.com/smacker/go-tree-sitter/c"
	"github.com/smacker/go-tree-sitter/cpp"
	"github.com/smacker/go-tree-sitter/golang"
	"github.com/smacker/go-tree-sitter/java"
	"github.com/smacker/go-tree-sitter/javascript"
	"github.com/smacker/go-tree-sitter/python"
	"github.com/smacker/go-tree-sitter/rust"
	"github.com/smacker/go-tree-sitter/typescript/tsx"
	"github.com/smacker/go-tree-sitter/typescript/typescript"
)

// Available reports whether this binary can map repositories (see
// nocgo.go).
const Available = true

// grammar says which nodes of one tree-sitter grammar are definitions.
type grammar struct {
	name string
	lang func() *sitter.Language
	// defs maps a node type to the kind of definition it is.
	defs map[string]string
	// wrappers are nodes whose named children sit at the wrapper's own level
	// (export statements, decorators, include guards, namespaces, parse
	// errors): extraction looks through them.
	wrappers map[string]bool
	// members are the definition kinds whose body holds definitions shown
	// under them (a class's methods, an impl's functions).
	members map[string]bool
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

var (
	goGrammar = &grammar{
		name: "go", lang: golang.GetLanguage,
		defs: map[string]string{
			"function_declaration": "func", "method_declaration": "method",
			"type_spec": "type", "type_alias": "type", "const_spec": "const", "var_spec": "var",
		},
		wrappers: set("type_declaration", "const_declaration", "var_declaration", "ERROR"),
	}
	pythonGrammar = &grammar{
		name: "python", lang: python.GetLanguage,
		defs:     map[string]string{"function_definition": "def", "class_definition": "class"},
		wrappers: set("decorated_definition", "ERROR", "if_statement", "block"),
		members:  set("class"),
	}
	jsDefs = map[string]string{
		"function_declaration": "function", "generator_function_declaration": "function",
		"class_declaration": "class", "abstract_class_declaration": "class", "class": "class",
		"method_definition": "method", "variable_declarator": "const",
		"interface_declaration": "interface", "type_alias_declaration": "type", "enum_declaration": "enum",
		"function_signature": "function", "method_signature": "method", "abstract_method_signature": "method",
		"module": "namespace", "internal_module": "namespace",
	}
	jsWrappers = set("export_statement", "lexical_declaration", "variable_declaration", "ambient_declaration",
		"expression_statement", "ERROR")
	jsMembers = set("class", "interface", "namespace")

	javascriptGrammar = &grammar{name: "javascript", lang: javascript.GetLanguage, defs: jsDefs, wrappers: jsWrappers, members: jsMembers}
	typescriptGrammar = &grammar{name: "typescript", lang: typescript.GetLanguage, defs: jsDefs, wrappers: jsWrappers, members: jsMembers}
	tsxGrammar        = &grammar{name: "tsx", lang: tsx.GetLanguage, defs: jsDefs, wrappers: jsWrappers, members: jsMembers}

	rustGrammar = &grammar{
		name: "rust", lang: rust.GetLanguage,
		defs: map[string]string{
			"function_item": "fn", "function_signature_item": "fn", "struct_item": "struct", "enum_item": "enum",
			"union_item": "union", "trait_item": "trait", "impl_item": "impl", "type_item": "type",
			"const_item": "const", "static_item": "static", "macro_definition": "macro", "mod_item": "mod",
		},
		wrappers: set("ERROR"),
		members:  set("trait", "impl", "mod"),
	}
	cDefs = map[string]string{
		"function_definition": "func", "declaration": "func", "field_declaration": "func",
		"struct_specifier": "struct", "class_specifier": "class", "union_specifier": "union",
		"enum_specifier": "enum", "type_definition": "typedef", "namespace_definition": "namespace",
		"alias_declaration": "type",
	}
	cWrappers = set("preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif", "template_declaration",
		"linkage_specification", "declaration_list", "ERROR")
	cMembers = set("struct", "class", "union", "namespace")

	cGrammar   = &grammar{name: "c", lang: c.GetLanguage, defs: cDefs, wrappers: cWrappers, members: cMembers}
	cppGrammar = &grammar{name: "cpp", lang: cpp.GetLanguage, defs: cDefs, wrappers: cWrappers, members: cMembers}

	javaGrammar = &grammar{
		name: "java", lang: java.GetLanguage,
		defs: map[string]string{
			"class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
			"record_declaration": "record", "annotation_type_declaration": "annotation",
			"method_declaration": "method", "constructor_declaration": "constructor",
		},
		wrappers: set("enum_body_declarations", "ERROR"),
		members:  set("class", "interface", "enum", "record"),
	}
)

// grammars maps a file extension to its grammar. A .h header is read as
// C++, which parses nearly all C headers and also C++ classes.
var grammars = map[string]*grammar{
	".go": goGrammar,
	".py": pythonGrammar, ".pyi": pythonGrammar,
	".js": javascriptGrammar, ".jsx": javascriptGrammar, ".mjs": javascriptGrammar, ".cjs": javascriptGrammar,
	".ts": typescriptGrammar, ".mts": typescriptGrammar, ".cts": typescriptGrammar,
	".tsx": tsxGrammar,
	".rs":  rustGrammar,
	".c":   cGrammar,
	".h":   cppGrammar, ".hh": cppGrammar, ".hpp": cppGrammar, ".hxx": cppGrammar,
	".cc": cppGrammar, ".cpp": cppGrammar, ".cxx": cppGrammar,
	".java": javaGrammar,
}

// grammarFor returns the grammar of a path, or nil for a language the map
// does not know.
func grammarFor(p string) *grammar {
	return grammars[strings.ToLower(path.Ext(p))]
}
