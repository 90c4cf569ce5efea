package wire

// The answers of session.view, one per view (also what
// shoal://session/{view} reads).

// CwdView is session.view {view: "cwd"}: the session's working directory
// now.
type CwdView struct {
	Cwd     string `json:"cwd"`
	Session string `json:"session"`
}

// EnvView is session.view {view: "env"}: the exported variables, with
// their values only when the caller holds the EnvRead grant (Values then
// says why they are missing).
type EnvView struct {
	Count         int      `json:"count"`
	Session       string   `json:"session"`
	Values        string   `json:"values,omitempty"`
	ValuesGranted bool     `json:"values_granted"`
	Vars          []EnvVar `json:"vars"`
}

// EnvVar is one variable of an EnvView.
type EnvVar struct {
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"`
}

// ReefView is session.view {view: "reef"}: the nearest reef.toml at or
// above the working directory and each tool it declares.
type ReefView struct {
	Active   bool       `json:"active"`
	Cwd      string     `json:"cwd"`
	Scope    string     `json:"scope,omitempty"`
	Manifest string     `json:"manifest,omitempty"`
	Lock     *string    `json:"lock"`
	Tools    []ReefTool `json:"tools"`
	Message  string     `json:"message,omitempty"`
}

// ReefTool is one declared tool of a ReefView.
type ReefTool struct {
	Name        string `json:"name"`
	Requirement string `json:"requirement"`
	Resolved    bool   `json:"resolved"`
	Path        string `json:"path,omitempty"`
	Locked      *struct {
		Version string `json:"version,omitempty"`
		Path    string `json:"path,omitempty"`
	} `json:"locked"`
	// LockMatches is false when the lock pins a path other than the one
	// the session resolves now.
	LockMatches *bool  `json:"lock_matches,omitempty"`
	Problem     string `json:"problem,omitempty"`
}
