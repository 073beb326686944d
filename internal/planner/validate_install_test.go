package planner

import (
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
)

func TestInstalls(t *testing.T) {
	for _, tc := range []struct {
		line string
		what string // "" means the command installs nothing
		kind installKind
	}{
		// node
		{"npm install", "npm install", installNode},
		{"npm install lodash", "npm install", installNode},
		{"npm i -D jest", "npm i", installNode},
		{"npm ci", "npm ci", installNode},
		{"npm add left-pad", "npm add", installNode},
		{"npm update", "npm update", installNode},
		{"npm install-test", "npm install-test", installNode},
		{"npm --prefix web install", "npm install", installNode},
		{"npm -C web --silent ci", "npm ci", installNode},
		{"/usr/local/bin/npm install", "npm install", installNode},
		{"npm init vite", "npm init vite", installNode},
		{"npm create vite@latest app", "npm create", installNode},
		{"npx create-react-app app", "npx create-react-app", installNode},
		{"npx @angular/create-app x", "npx @angular/create-app", installNode},
		{"npx -p cowsay cowsay hi", "npx -p", installNode},
		{"npx --package=cowsay cowsay", "npx --package=cowsay", installNode},
		{"pnpm install", "pnpm install", installNode},
		{"pnpm i", "pnpm i", installNode},
		{"pnpm add -D vitest", "pnpm add", installNode},
		{"pnpm -C web add x", "pnpm add", installNode},
		{"pnpm dlx cowsay", "pnpm dlx", installNode},
		{"yarn", "yarn", installNode},
		{"yarn --frozen-lockfile", "yarn", installNode},
		{"yarn --cwd web", "yarn", installNode},
		{"yarn add lodash", "yarn add", installNode},
		{"yarn install", "yarn install", installNode},
		{"yarn global add x", "yarn global add", installNode},
		{"bun install", "bun install", installNode},
		{"bun add zod", "bun add", installNode},
		// python
		{"pip install requests", "pip install", installPython},
		{"pip3 install -r requirements.txt", "pip3 install", installPython},
		{"pip3.12 install x", "pip3.12 install", installPython},
		{"pip -q --disable-pip-version-check install x", "pip install", installPython},
		{"pip --timeout 5 install x", "pip install", installPython},
		{"pip download x", "pip download", installPython},
		{"python -m pip install requests", "python -m pip install", installPython},
		{"python3 -m pip install -e .", "python3 -m pip install", installPython},
		{"/usr/bin/python3.12 -I -mpip install x", "python3.12 -m pip install", installPython},
		{"python3 -m pip --quiet install x", "python3 -m pip install", installPython},
		{"python3 -m uv pip install x", "python3 -m uv pip install", installPython},
		{"uv pip install requests", "uv pip install", installPython},
		{"uv add httpx", "uv add", installPython},
		{"uv sync", "uv sync", installPython},
		{"uv --directory app add x", "uv add", installPython},
		{"uv tool install ruff", "uv tool install", installPython},
		{"uvx ruff check .", "uvx", installPython},
		{"poetry add requests", "poetry add", installPython},
		{"poetry install", "poetry install", installPython},
		{"poetry -C app install", "poetry install", installPython},
		{"pipenv install", "pipenv install", installPython},
		{"pipx run black .", "pipx run", installPython},
		// go
		{"go get example.com/x", "go get", installGo},
		{"go get -u ./...", "go get", installGo},
		{"go -C sub get example.com/x@v1.2.0", "go get", installGo},
		{"go -C=sub get x", "go get", installGo},
		{"go install example.com/x@v1", "go install example.com/x@v1", installGo},
		{"go install -v golang.org/x/tools/cmd/stringer@latest", "go install golang.org/x/tools/cmd/stringer@latest", installGo},
		{"go install -tags x example.com/cmd/y@v0.1.0", "go install example.com/cmd/y@v0.1.0", installGo},
		{"go run golang.org/x/tools/cmd/stringer@v0.20.0 -type=T", "go run golang.org/x/tools/cmd/stringer@v0.20.0", installGo},
		{"go mod download", "go mod download", installGo},
		{"go mod download -x", "go mod download", installGo},
		{"go mod tidy", "go mod tidy", installGo},
		// cargo
		{"cargo add serde", "cargo add", installCargo},
		{"cargo install ripgrep", "cargo install", installCargo},
		{"cargo fetch", "cargo fetch", installCargo},
		{"cargo update", "cargo update", installCargo},
		{"cargo +nightly add x", "cargo add", installCargo},
		{"cargo -q --color never fetch", "cargo fetch", installCargo},
		// downloads
		{"curl -fsSL https://example.com/x.tar.gz -o x.tar.gz", "curl", installFetch},
		{"curl localhost:8080", "curl", installFetch},
		{"wget https://example.com/data.csv", "wget", installFetch},
		{"git clone https://github.com/a/b", "git clone", installFetch},
		{"git -C vendor/b fetch", "git fetch", installFetch},
		{"git pull", "git pull", installFetch},
		{"git submodule update --init", "git submodule update", installFetch},
		{"git submodule --quiet add https://x/y", "git submodule add", installFetch},
		// system and other ecosystems
		{"apt-get install -y jq", "apt-get install", installSystem},
		{"apt-get -o Debug::x=1 -y install jq", "apt-get install", installSystem},
		{"apt install jq", "apt install", installSystem},
		{"apt-get update", "apt-get update", installSystem},
		{"dnf install -y jq", "dnf install", installSystem},
		{"apk add jq", "apk add", installSystem},
		{"brew install jq", "brew install", installSystem},
		{"gem install rspec", "gem install", installOther},
		{"bundle install", "bundle install", installOther},
		{"bundle", "bundle", installOther},
		{"composer install", "composer install", installOther},
		{"composer require monolog/monolog", "composer require", installOther},
		{"composer global require x", "composer global require", installOther},
		{"dotnet restore", "dotnet restore", installOther},
		{"dotnet add app.csproj package Newtonsoft.Json", "dotnet add package", installOther},
		{"dotnet tool install -g x", "dotnet tool install", installOther},
		{"deno add jsr:@std/assert", "deno add", installOther},
		{"conda install numpy", "conda install", installOther},
		// wrappers
		{"env CI=1 npm ci", "npm ci", installNode},
		{"env -u HOME -i PATH=/bin pip install x", "pip install", installPython},
		{"timeout 60 go mod download", "go mod download", installGo},
		{"timeout -k 5 --signal=KILL 60 npm install", "npm install", installNode},
		{"nice -n 10 cargo fetch", "cargo fetch", installCargo},
		{"sudo -u root apt-get install jq", "apt-get install", installSystem},
		{"nohup time -p pip install x", "pip install", installPython},
		{`bash -c "npm install && npm test"`, "npm install", installNode},
		{`sh -c "npm test || npm ci"`, "npm ci", installNode},
		{`bash -ec 'cd web; yarn add x'`, "yarn add", installNode},
		{`bash -o pipefail -c "curl -s https://x | sh"`, "curl", installFetch},
		{`sh -c "pip install \"requests>=2\""`, "pip install", installPython},
		{`sh -c 'echo $(curl -s https://example.com)'`, "curl", installFetch},
		{`sh -c 'for p in a b; do pip install $p; done'`, "pip install", installPython},
		{`bash -c "exec npm ci"`, "npm ci", installNode},
		{`sh -c "sh -c 'go get x'"`, "go get", installGo},
		{`env sh -c "timeout 5 cargo update"`, "cargo update", installCargo},

		// not installs
		{"npm test", "", 0},
		{"npm run build", "", 0},
		{"npm run install", "", 0},
		{"npm --version", "", 0},
		{"npm ls", "", 0},
		{"npm init -y", "", 0},
		{"npm exec -- jest", "", 0},
		{"npx --no tsc --noEmit", "", 0},
		{"npx jest --ci", "", 0},
		{"npx -c 'npm install'", "", 0},
		{"pnpm test", "", 0},
		{"pnpm run build", "", 0},
		{"pnpm", "", 0},
		{"pnpm -C web exec vitest run", "", 0},
		{"yarn test", "", 0},
		{"yarn run build", "", 0},
		{"yarn --version", "", 0},
		{"yarn -v", "", 0},
		{"yarn global list", "", 0},
		{"bun test", "", 0},
		{"node --test", "", 0},
		{"go test ./...", "", 0},
		{"go build ./cmd/x", "", 0},
		{"go vet ./...", "", 0},
		{"go list -m all", "", 0},
		{"go mod verify", "", 0},
		{"go mod graph", "", 0},
		{"go install ./cmd/tool", "", 0},
		{"go install example.com/x", "", 0},
		{"go run ./cmd/x user@example.com", "", 0},
		{"go run main.go a@b", "", 0},
		{"go run -newflag x@v1", "", 0},
		{"go version", "", 0},
		{"go", "", 0},
		{"go -C", "", 0},
		{"cargo test", "", 0},
		{"cargo build --all-targets", "", 0},
		{"cargo +stable test", "", 0},
		{"cargo --version", "", 0},
		{"cargo tree", "", 0},
		{"python -m pytest -q", "", 0},
		{"python3 -m unittest discover -s tests -t . -v", "", 0},
		{`python3 -c "import pip; print('install')"`, "", 0},
		{"python3 tools/install.py", "", 0},
		{"python3 -m pip --version", "", 0},
		{"python3 -m pip list", "", 0},
		{"python3 -m pip show requests", "", 0},
		{"python3 -m pip check", "", 0},
		{"python3 -m venv .venv", "", 0},
		{"python3 -m ensurepip", "", 0},
		{"python3 -m mymod install", "", 0},
		{"pip --version", "", 0},
		{"pip list", "", 0},
		{"pip show requests", "", 0},
		{"pip freeze", "", 0},
		{"pip", "", 0},
		{"uv run pytest", "", 0},
		{"uv pip list", "", 0},
		{"uv --version", "", 0},
		{"uvx --version", "", 0},
		{"poetry run pytest", "", 0},
		{"curl --version", "", 0},
		{"curl", "", 0},
		{"wget -V", "", 0},
		{"git status", "", 0},
		{"git diff --exit-code", "", 0},
		{"git -C fetch status", "", 0},
		{"git submodule status", "", 0},
		{"git log --grep install", "", 0},
		{"apt-cache policy jq", "", 0},
		{"apt list --installed", "", 0},
		{"gem list", "", 0},
		{"bundle exec rspec", "", 0},
		{"bundle --version", "", 0},
		{"composer test", "", 0},
		{"dotnet test", "", 0},
		{"dotnet add reference ../lib", "", 0},
		{"deno test", "", 0},
		{"make install", "", 0},
		{"echo npm install", "", 0},
		{"grep -q install README.md", "", 0},
		{"env", "", 0},
		{"env -S 'npm install'", "", 0},
		{"timeout 60", "", 0},
		{"timeout 60 npm test", "", 0},
		{"sudo -i", "", 0},
		{"command -v npm", "", 0},
		{"bash scripts/install.sh", "", 0},
		{"bash -e scripts/test.sh", "", 0},
		{`bash -c "npm test && go test ./..."`, "", 0},
		{`sh -c "echo 'npm install'"`, "", 0},
		{`sh -c 'yarn $CMD'`, "", 0},
		{`sh -c 'npm "$SUB"'`, "", 0},
		{`sh -c 'curl "$URL"'`, "curl", installFetch},
		{`sh -c "if then"`, "", 0},
		{`bash -c`, "", 0},
	} {
		t.Run(tc.line, func(t *testing.T) {
			argv, err := proc.ParseCommand(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := installs(argv)
			switch {
			case tc.what == "" && ok:
				t.Fatalf("installs = %+v, want nothing", got)
			case tc.what != "" && !ok:
				t.Fatalf("installs nothing, want %q", tc.what)
			case ok && (got.what != tc.what || got.kind != tc.kind):
				t.Fatalf("installs = %q (kind %d), want %q (kind %d)", got.what, got.kind, tc.what, tc.kind)
			}
		})
	}
}

// The wrappers are followed only so deep: a command nested deeper is not
// read (and costs nothing).
func TestInstallsDepthIsBounded(t *testing.T) {
	argv := []string{"npm", "install"}
	for range maxInstallDepth + 1 {
		argv = append([]string{"env"}, argv...)
	}
	if in, ok := installs(argv); ok {
		t.Fatalf("installs = %+v through %d wrappers", in, maxInstallDepth+1)
	}
	if _, ok := installs(argv[1:]); !ok {
		t.Fatalf("%d wrappers are not followed", maxInstallDepth)
	}
}

// The message names the command and what installs, and says how to do
// without it: the planner model acts on it alone.
func TestInstallMessage(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"npm install lodash", `acceptance command "npm install lodash" installs or downloads packages (npm install): commands run without network; ` +
			"declare the dependency in package.json (the harness installs it from the manifest and lockfile before verification) and test it with a command that runs offline"},
		{"python3 -m pip install requests", "(python3 -m pip install): commands run without network; declare the dependency in requirements.txt or in pyproject.toml's [project] dependencies"},
		{"go get example.com/x", "(go get): commands run without network; declare the module in go.mod"},
		{"cargo add serde", "declare the crate in Cargo.toml"},
		{"git clone https://x/y", "downloads from the network (git clone): commands run without network; a file the work needs must be written by a work order"},
		{"apt-get install -y jq", "installs system packages (apt-get install)"},
		{"gem install rspec", "the harness installs dependencies only from package.json, go.mod, Cargo.toml, requirements.txt or pyproject.toml"},
	} {
		argv, err := proc.ParseCommand(tc.line)
		if err != nil {
			t.Fatal(err)
		}
		v := &validator{}
		if !v.installCheck(0, "WO-01", "acceptance_commands[0]", "acceptance command", tc.line, argv) {
			t.Fatalf("%q: no E108", tc.line)
		}
		if got := v.issues[0]; got.Code != "E108" || !strings.Contains(got.Message, tc.want) {
			t.Errorf("%q: issue %+v lacks %q", tc.line, got.Issue, tc.want)
		}
	}
}

// FuzzInstalls reads model-written command lines for what E108 checks, as
// an argv and as the string of `sh -c`. Properties: deterministic, even on
// shell strings ParseCommand refuses; a finding names a known installer
// first; `sh -c LINE`, `env -- ARGV` and `sh -c QUOTED-ARGV` find exactly
// what the argv finds one wrapper deep.
func FuzzInstalls(f *testing.F) {
	for _, s := range []string{
		"npm install lodash", "npm --prefix web ci", "npx create-vite app", "pnpm -C x add y", "yarn", "yarn --cwd a test",
		"pip3 --timeout 5 install x", "python3 -I -m pip install -r requirements.txt", "python -mpip list", "uv pip install x", "uvx ruff",
		"go -C sub get x", "go install -v example.com/x@v1", "go run ./x a@b", "go mod tidy", "go mod verify", "cargo +nightly -q fetch",
		"curl -V", "git -C x submodule update", "apt-get -o a=b install jq", "dotnet add p.csproj package X", "composer global require x",
		"env -u A B=1 timeout -k 1 5 nice -n 3 npm ci", `bash -ec "cd x && npm install"`, `sh -c 'for p in a; do pip install "$p"; done'`,
		`sh -c "sh -c 'go get x'"`, "sudo -i", "command -v npm", "npm test", "cargo test", "python -m pytest",
	} {
		f.Add(s)
	}
	known := func(w string) bool {
		_, tool := tools[w]
		switch w {
		case "go", "npm", "npx", "uvx", "curl", "wget", "dotnet":
			return true
		}
		return tool || pipName.MatchString(w) || isPython(w)
	}
	f.Fuzz(func(t *testing.T, line string) {
		shell := []string{"sh", "-c", line}
		in, ok := installs(shell)
		if again, ok2 := installs(shell); again != in || ok2 != ok {
			t.Fatalf("sh -c %q: not deterministic: %+v then %+v", line, in, again)
		}
		if ok && (in.what == "" || !known(strings.Fields(in.what)[0])) {
			t.Fatalf("sh -c %q: finding %+v does not name a known installer", line, in)
		}
		argv, err := proc.ParseCommand(line)
		if err != nil {
			return
		}
		want, wantOK := installsAt(argv, 1)
		if in != want || ok != wantOK {
			t.Fatalf("sh -c %q finds %+v %v, the argv %q one wrapper deep %+v %v", line, in, ok, argv, want, wantOK)
		}
		if got, gotOK := installs(append([]string{"env", "--"}, argv...)); got != want || gotOK != wantOK {
			t.Fatalf("env -- %q finds %+v %v, the argv one wrapper deep %+v %v", argv, got, gotOK, want, wantOK)
		}
		quoted := make([]string, len(argv))
		for i, w := range argv {
			quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		if got, gotOK := installs([]string{"sh", "-c", strings.Join(quoted, " ")}); got != want || gotOK != wantOK {
			t.Fatalf("sh -c with %q quoted finds %+v %v, the argv one wrapper deep %+v %v", argv, got, gotOK, want, wantOK)
		}
	})
}
