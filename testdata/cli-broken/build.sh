#!/bin/sh
# A build that fails the way real ones do: some output, then an error.
echo "compiling agent"
echo "error: cannot resolve module 'missing-dependency'" >&2
exit 3
