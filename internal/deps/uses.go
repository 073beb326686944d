package deps

// Uses reports whether root has a manifest or lockfile of any ecosystem, that is whether Step
// would do more than return: the harness then prepares the step's confinement and the dependency
// cache, and leaves the user's home alone otherwise.
func Uses(root string) (bool, error) {
	for _, eco := range Ecosystems {
		d := drivers[eco]
		if d == nil {
			continue
		}
		inputs, err := d.inputs(root)
		if err != nil || len(inputs) > 0 {
			return err == nil, err
		}
	}
	return false, nil
}

// InstalledTrees are the directories of the work tree the step installs into, and cargo's build
// output: never committed, and kept between a build's orders when the repository ignores them.
var InstalledTrees = []string{"node_modules", ".venv", "target"}
