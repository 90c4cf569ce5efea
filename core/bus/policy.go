package bus

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shoal-sh/shoal/core/rpc"
)

// UserChannel declares one user.* channel, or a family of them, the way an
// [[events.channel]] entry of the kernel config does (SPEC E8).
type UserChannel struct {
	// Name is an exact channel ("user.build.v1") or a pattern ending in
	// ".*" ("user.ci.*") that covers every channel strictly below its
	// prefix (user.ci.x, user.ci.x.y, but not user.ci itself).
	Name string
	// Validator names the validator (the plugin's name) for messages; empty
	// means the channel has no validator.
	Validator string
	// Validate checks each payload before it is published. It must be set
	// exactly when Validator is.
	Validate Validator
}

func (uc UserChannel) pattern() (prefix string, ok bool) {
	return strings.CutSuffix(uc.Name, "*")
}

// userPolicy is an immutable snapshot of the declared user channels;
// PublishClient reads it without a lock.
type userPolicy struct {
	strict   bool
	exact    map[string]UserChannel
	patterns []UserChannel // longest prefix first, so the most specific wins
}

// lookup finds the declaration covering channel: an exact name beats any
// pattern, and a longer pattern beats a shorter one.
func (p *userPolicy) lookup(channel string) (UserChannel, bool) {
	if p == nil {
		return UserChannel{}, false
	}
	if uc, ok := p.exact[channel]; ok {
		return uc, true
	}
	for _, uc := range p.patterns {
		prefix, _ := uc.pattern()
		if strings.HasPrefix(channel, prefix) && len(channel) > len(prefix) {
			return uc, true
		}
	}
	return UserChannel{}, false
}

// SetUserChannels replaces the declared user channels and the strict flag.
// With strict set, PublishClient refuses any user.* channel no declaration
// covers. It checks every declaration first and changes nothing when one is
// malformed, duplicated, or names a validator without a Validate func (a
// declared validator is never silently skipped). Safe to call while
// publishing: each publish sees either the old or the new set.
func (b *Bus) SetUserChannels(strict bool, channels []UserChannel) error {
	p := &userPolicy{strict: strict, exact: make(map[string]UserChannel, len(channels))}
	seen := make(map[string]bool, len(channels))
	var errs []error
	for _, uc := range channels {
		if seen[uc.Name] {
			errs = append(errs, fmt.Errorf("user channel %q is declared twice", uc.Name))
			continue
		}
		seen[uc.Name] = true
		if (uc.Validator == "") != (uc.Validate == nil) {
			if uc.Validate == nil {
				errs = append(errs, fmt.Errorf("user channel %q: validator %q is not loaded", uc.Name, uc.Validator))
			} else {
				errs = append(errs, fmt.Errorf("user channel %q: a Validate func needs a validator name", uc.Name))
			}
			continue
		}
		if prefix, ok := uc.pattern(); ok {
			if !strings.HasSuffix(prefix, ".") {
				errs = append(errs, fmt.Errorf("user channel pattern %q: '*' may only follow a dot, as in user.ci.*", uc.Name))
				continue
			}
			base := strings.TrimSuffix(prefix, ".")
			if base != "user" {
				if err := CheckClientChannel(base); err != nil {
					errs = append(errs, fmt.Errorf("user channel pattern %q: %w", uc.Name, err))
					continue
				}
			}
			p.patterns = append(p.patterns, uc)
			continue
		}
		if err := CheckClientChannel(uc.Name); err != nil {
			errs = append(errs, fmt.Errorf("user channel %q: %w", uc.Name, err))
			continue
		}
		p.exact[uc.Name] = uc
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("declare user channels: %w", err)
	}
	slices.SortStableFunc(p.patterns, func(a, b UserChannel) int { return len(b.Name) - len(a.Name) })
	b.policy.Store(p)
	return nil
}

// admit applies the declarations to a client publish: strict mode first,
// then the validator. It runs before any seq is taken, so a refusal
// publishes nothing and uses no seq.
func (b *Bus) admit(channel string, payload []byte) error {
	p := b.policy.Load()
	uc, known := p.lookup(channel)
	if !known {
		if p != nil && p.strict {
			return rpc.Errorf(rpc.InvalidParams, "channel %q is not declared and the kernel runs in strict mode: publish on a declared channel (%s) or ask the operator to add it under [[events.channel]] in config.toml", channel, p.declared())
		}
		return nil
	}
	if uc.Validate == nil {
		return nil
	}
	err := uc.Validate(channel, payload)
	if err == nil {
		return nil
	}
	var re *rpc.Error
	if errors.As(err, &re) && re.Code != rpc.Rejected {
		// The validator could not give a verdict (a plugin trap, a
		// deadline): keep its code so the caller can tell that apart from
		// a refusal.
		return rpc.Errorf(re.Code, "validator %q for %s could not check the payload: %s; nothing was published", uc.Validator, channel, re.Message)
	}
	reason := err.Error()
	if re != nil {
		reason = re.Message
	}
	return rpc.Errorf(rpc.Rejected, "validator %q rejected the payload for %s: %s; nothing was published, fix the payload and publish again", uc.Validator, channel, reason)
}

func (p *userPolicy) declared() string {
	names := make([]string, 0, len(p.exact)+len(p.patterns))
	for name := range p.exact {
		names = append(names, name)
	}
	for _, uc := range p.patterns {
		names = append(names, uc.Name)
	}
	if len(names) == 0 {
		return "none are declared"
	}
	slices.Sort(names)
	const show = 10
	if len(names) > show {
		return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
	}
	return strings.Join(names, ", ")
}
