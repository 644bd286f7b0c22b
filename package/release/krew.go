package main

import "strings"

// KrewPlugin is krew's plugin manifest (krew.googlecontainertools.github.com/v1alpha2
// Plugin), as far as this plugin fills it.
type KrewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec KrewSpec `json:"spec"`
}

// KrewSpec is the plugin manifest's spec.
type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one platform's archive: where it is, its SHA-256, the
// executable in it and the files krew installs.
type KrewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string     `json:"uri"`
	SHA256 string     `json:"sha256"`
	Bin    string     `json:"bin"`
	Files  []KrewFile `json:"files"`
}

// KrewFile is a file krew copies out of the archive.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func manifest(version string) KrewPlugin {
	var m KrewPlugin
	m.APIVersion, m.Kind, m.Metadata.Name = "krew.googlecontainertools.github.com/v1alpha2", "Plugin", Plugin
	m.Spec = KrewSpec{
		Version:          version,
		Homepage:         "https://github.com/kausality-io/kausality-crossplane",
		ShortDescription: "Show, explain and preview what Kausality lets through to the cloud",
		Description: "kubectl kausality shows the gates, allowances and traces Kausality keeps on\n" +
			"Crossplane composites and managed resources, explains why a change was let\n" +
			"through or withheld, previews what an edit would do, and derives\n" +
			"AllowancePolicies from Compositions.\n",
	}
	return m
}

// platformOf is the krew platform of the archive folder.tar.gz
// (kubectl-kausality_<os>_<arch>) under url, whose SHA-256 is sha.
func platformOf(folder, url, sha string) KrewPlatform {
	parts := strings.Split(strings.TrimPrefix(folder, binary+"_"), "_")
	os, arch := parts[0], parts[len(parts)-1]
	bin := binary
	if os == "windows" {
		bin += ".exe"
	}
	p := KrewPlatform{URI: url + "/" + folder + ".tar.gz", SHA256: sha, Bin: bin,
		Files: []KrewFile{{From: folder + "/" + bin, To: "."}, {From: folder + "/README.md", To: "."}}}
	p.Selector.MatchLabels = map[string]string{"os": os, "arch": arch}
	return p
}
