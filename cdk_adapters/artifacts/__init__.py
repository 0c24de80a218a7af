"""Adapter archives and where they live: artifacts, locations, the adapter bucket, packaging,
publishing and S3 checksums."""
