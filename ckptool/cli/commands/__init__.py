"""One module per subcommand; each defines ``command``."""
