package main

import (
	"fmt"
	"os"
)

// blobPutCommand stores a file of any size in the content store: a
// regular file is handed to the kernel, which reads it; other input is
// streamed on the side socket (or sent in chunks). The kernel holds at
// most a few chunks of it at a time.
func blobPutCommand() *command {
	return &command{name: "blob put", args: "FILE", short: "store a file (any size) in the content store; prints its val:blake3 ref",
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("blob put needs FILE (- for standard input)")
			}
			f := os.Stdin
			if pos[0] != "-" {
				var err error
				if f, err = os.Open(pos[0]); err != nil {
					return err
				}
				defer f.Close()
			}
			c, err := x.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.BlobPut(x.ctx, f)
			if err != nil {
				return err
			}
			if *x.cf.json {
				return printJSON(x.stdout, res)
			}
			fmt.Fprintf(x.stdout, "%s %d bytes\n", res.Ref, res.Size)
			return nil
		}}
}

// blobGetCommand writes a blob to a file in ranges and checks its hash.
func blobGetCommand() *command {
	return &command{name: "blob get", args: "REF FILE", short: "write a blob (any size) to FILE (- for standard output), checking its hash",
		run: func(x *invocation, pos []string) error {
			if len(pos) != 2 {
				return usageErr("blob get needs REF and FILE (- for standard output)")
			}
			c, err := x.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			out := os.Stdout
			if pos[1] != "-" {
				if out, err = os.Create(pos[1]); err != nil {
					return err
				}
			}
			size, err := c.BlobGet(x.ctx, pos[0], out)
			if pos[1] != "-" {
				if cerr := out.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				if pos[1] != "-" {
					os.Remove(pos[1]) // no partial or unchecked file is left
				}
				return err
			}
			if pos[1] != "-" && !*x.cf.json {
				fmt.Fprintf(x.stdout, "%s: %d bytes\n", pos[1], size)
			}
			return nil
		}}
}
