"""Writers, readers and exporters for what kame-data produces on disk."""
