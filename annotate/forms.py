from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from .models import Role


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=Role.choices, label="Role")
    adjudicator = forms.BooleanField(required=False, label="May adjudicate (coders)")

    def clean_username(self):
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise forms.ValidationError(f"There is no user '{username}'.")
        self.cleaned_data["user"] = user
        return username
