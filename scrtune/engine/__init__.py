"""The one engine: mergeable statistics, checkpoint classification, summary, replay."""
