// The eval suite's cases and answers are data, not code of factory: this file
// keeps their Go files (a case's hidden tests import its own module, which
// exists only once the case's start/ is copied into a repository) out of
// factory's module and out of `go test ./...`.
module github.com/factory-harness/factory/examples/eval

go 1.26
