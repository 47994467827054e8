"""What outlives a build on disk: state.db and the no-op proof."""
