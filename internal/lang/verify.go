package lang

// CMakeBuildDir is where the C/C++ profile configures CMake.
const CMakeBuildDir = "build"

// Verify is the global verification of a repository without
// scripts/verify.sh: each profile's commands in profile order, as argv
// lists run without a shell in the repository root. python is the
// interpreter the Python commands use.
func (d Detection) Verify(python string) [][]string {
	var out [][]string
	for _, p := range d.Profiles {
		out = append(out, p.Verify(python)...)
	}
	return out
}

// CompileOnly is the verification of a verify-exempt work order (one that
// runs before the plan's verify contract holds): each profile's build
// without its tests. For Python it is the seeds' `python -m compileall -q .`.
func (d Detection) CompileOnly(python string) [][]string {
	var out [][]string
	for _, p := range d.Profiles {
		out = append(out, p.CompileOnly(python)...)
	}
	return out
}

// Verify is the profile's default global verification.
func (p Profile) Verify(python string) [][]string {
	switch p.ID {
	case Go:
		return [][]string{{"go", "vet", "./..."}, {"go", "test", "./..."}}
	case Rust:
		return [][]string{{"cargo", "build", "--all-targets"}, {"cargo", "test"}}
	case JavaScript:
		out := p.typecheck()
		switch {
		case p.TestScript:
			out = append(out, []string{p.PackageManager, "test"})
		case p.Runner == "jest":
			out = append(out, []string{"npx", "--no", "jest"})
		case p.Runner == "vitest":
			out = append(out, []string{"npx", "--no", "vitest", "run"})
		default:
			out = append(out, []string{"node", "--test"})
		}
		return out
	case CFamily:
		if p.CMake {
			return [][]string{
				{"cmake", "-S", ".", "-B", CMakeBuildDir},
				{"cmake", "--build", CMakeBuildDir},
				{"ctest", "--test-dir", CMakeBuildDir, "--output-on-failure"},
			}
		}
		return [][]string{{"make", "test"}}
	case Java:
		return [][]string{p.javaCommand("test")}
	case Python:
		// The seeds' fallback, unchanged (ARCHITECTURE "PO Node").
		return [][]string{
			{python, "-m", "compileall", "-q", "."},
			{python, "-m", "pip", "--version"},
			{python, "-m", "pytest", "-q"},
		}
	}
	return nil
}

// CompileOnly is the profile's build without tests; nil when it has none
// (JavaScript without TypeScript).
func (p Profile) CompileOnly(python string) [][]string {
	switch p.ID {
	case Go:
		return [][]string{{"go", "build", "./..."}}
	case Rust:
		return [][]string{{"cargo", "build", "--all-targets"}}
	case JavaScript:
		return p.typecheck()
	case CFamily:
		if p.CMake {
			return [][]string{{"cmake", "-S", ".", "-B", CMakeBuildDir}, {"cmake", "--build", CMakeBuildDir}}
		}
		return [][]string{{"make"}}
	case Java:
		return [][]string{p.javaCommand("test-compile")}
	case Python:
		return [][]string{{python, "-m", "compileall", "-q", "."}}
	}
	return nil
}

func (p Profile) typecheck() [][]string {
	if p.TypeScript {
		return [][]string{{"npx", "--no", "tsc", "--noEmit"}}
	}
	return nil
}

// javaCommand runs a build phase offline: the sandbox has no network, so
// dependencies must already be in the local repository (~/.m2, Gradle's cache).
func (p Profile) javaCommand(phase string) []string {
	switch {
	case p.GradleWrapper:
		return []string{"sh", "gradlew", "--offline", phaseGradle(phase)}
	case p.Gradle:
		return []string{"gradle", "--offline", phaseGradle(phase)}
	}
	return []string{"mvn", "--offline", "--batch-mode", "--quiet", phase}
}

func phaseGradle(phase string) string {
	if phase == "test-compile" {
		return "testClasses"
	}
	return phase
}
