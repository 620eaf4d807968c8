"""Running the emulator: in the caller's event loop, in a background thread, or as a child
process, and the kubeconfig it writes for clients. The top layer: it composes the HTTP app."""
