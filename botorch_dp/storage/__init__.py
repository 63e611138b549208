r"""Owner-only files that are never read or written through a symbolic link: the private directory,
atomic writes and checked reads (``private_files``), small JSON files (``json_files``) and the
one-owner directory lock (``lock``). DP-GIBO's checkpoints (``optim.checkpoint``) and ``tune``'s
(``tuning.tune_checkpoint``) are written with them."""
