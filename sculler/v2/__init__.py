"""Private helpers of the v2 front end (file formats, process-wide settings)."""
